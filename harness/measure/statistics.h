// Distribution-free statistics of timing samples: the confidence interval of the median from
// order statistics, which assumes nothing about the shape of the timing distribution (timings
// are skewed and heavy-tailed: a preempted run is 2x, never 0.5x).
#pragma once

#include <cstdint>
#include <vector>

namespace attnbench {

struct MedianInterval {
  double low = 0;
  double high = 0;
  double median = 0;
  // The interval's actual coverage, at least the confidence asked for (order statistics give a
  // discrete set of coverages); 0 when `valid` is false.
  double coverage = 0;
  // Too few samples for any interval of the asked confidence (fewer than 6 at 95%): low and
  // high are then the min and max, and the interval must not be read as one.
  bool valid = false;
};

// P(X <= k) for X ~ Binomial(n, 1/2): the probability that at most k of n samples fall below
// the median.
double binomial_half_cdf(int64_t n, int64_t k);

// The narrowest symmetric order-statistic interval [x(k), x(n-k+1)] (1-based, sorted) whose
// coverage 1 - 2 P(X <= k-1) is at least `confidence`. `samples` need not be sorted.
MedianInterval median_confidence_interval(std::vector<double> samples, double confidence = 0.95);

// Half the interval's width over the median: the relative precision of the median.
double relative_half_width(const MedianInterval& interval);

}  // namespace attnbench
