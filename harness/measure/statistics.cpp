#include "harness/measure/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attnbench {

double binomial_half_cdf(int64_t n, int64_t k) {
  if (k < 0) return 0;
  if (k >= n) return 1;
  // In logs: 0.5^n underflows a double past n = 1074 samples.
  const double log_half_n = static_cast<double>(n) * std::log(0.5);
  const double log_n_factorial = std::lgamma(static_cast<double>(n) + 1);
  double cdf = 0;
  for (int64_t i = 0; i <= k; ++i) {
    const double log_choose = log_n_factorial - std::lgamma(static_cast<double>(i) + 1) -
                              std::lgamma(static_cast<double>(n - i) + 1);
    cdf += std::exp(log_choose + log_half_n);
  }
  return std::min(cdf, 1.0);
}

MedianInterval median_confidence_interval(std::vector<double> samples, double confidence) {
  MedianInterval interval;
  if (samples.empty()) return interval;
  std::sort(samples.begin(), samples.end());
  const auto n = static_cast<int64_t>(samples.size());
  interval.median = n % 2 ? samples[static_cast<std::size_t>(n / 2)]
                          : 0.5 * (samples[static_cast<std::size_t>(n / 2 - 1)] +
                                   samples[static_cast<std::size_t>(n / 2)]);
  interval.low = samples.front();
  interval.high = samples.back();
  const double tail = (1 - confidence) / 2;
  // The largest k with P(X <= k-1) <= tail: each k is one more sample cut from either end. The
  // CDF only grows with k, so walk up from k = 1, adding one binomial term per step, and stop at
  // the first cut that is too wide. In logs: 0.5^n underflows past n = 1074 samples.
  const double log_half_n = static_cast<double>(n) * std::log(0.5);
  const double log_n_factorial = std::lgamma(static_cast<double>(n) + 1);
  int64_t k = 0;
  double tail_of_k = 0;
  double cdf = 0;  // P(X <= candidate - 1)
  for (int64_t candidate = 1; candidate <= (n + 1) / 2; ++candidate) {
    const int64_t i = candidate - 1;
    cdf += std::exp(log_n_factorial - std::lgamma(static_cast<double>(i) + 1) -
                    std::lgamma(static_cast<double>(n - i) + 1) + log_half_n);
    if (cdf > tail) break;
    k = candidate;
    tail_of_k = cdf;
  }
  if (k == 0) return interval;  // not valid: even [min, max] covers less than `confidence`
  interval.low = samples[static_cast<std::size_t>(k - 1)];
  interval.high = samples[static_cast<std::size_t>(n - k)];
  interval.coverage = 1 - 2 * tail_of_k;
  interval.valid = true;
  return interval;
}

double relative_half_width(const MedianInterval& interval) {
  if (!interval.valid || !(interval.median > 0)) return std::numeric_limits<double>::infinity();
  return (interval.high - interval.low) / 2 / interval.median;
}

}  // namespace attnbench
