// The median's confidence interval from order statistics, on synthetic samples whose answer is
// known: binomial tail sums worked by hand, the interval's ends for small n, and its coverage over
// many seeded draws.
#include "harness/measure/statistics.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>

namespace attnbench {
namespace {

TEST_CASE("binomial(n, 1/2) tail sums, worked by hand", "[statistics]") {
  CHECK(binomial_half_cdf(10, 0) == Approx(1.0 / 1024));
  CHECK(binomial_half_cdf(10, 1) == Approx(11.0 / 1024));
  CHECK(binomial_half_cdf(10, 2) == Approx(56.0 / 1024));
  CHECK(binomial_half_cdf(10, 10) == 1);
  CHECK(binomial_half_cdf(10, -1) == 0);
  // Far past where 0.5^n underflows a double: symmetric, so P(X <= n/2 - 1) + P(X = n/2) / 2 = 1/2.
  const double below_half = binomial_half_cdf(4000, 1999);
  const double at_most_half = binomial_half_cdf(4000, 2000);
  CHECK(below_half + (at_most_half - below_half) / 2 == Approx(0.5));
}

TEST_CASE("the interval is the k-th smallest and k-th largest sample", "[statistics]") {
  // n = 10: 2 P(X <= 1) = 0.0215 <= 0.05 < 2 P(X <= 2) = 0.109, so k = 2: [x(2), x(9)].
  const MedianInterval ten = median_confidence_interval({10, 1, 9, 2, 8, 3, 7, 4, 6, 5});
  REQUIRE(ten.valid);
  CHECK(ten.low == 2);
  CHECK(ten.high == 9);
  CHECK(ten.median == 5.5);
  CHECK(ten.coverage == Approx(1 - 22.0 / 1024));
  CHECK(relative_half_width(ten) == Approx(3.5 / 5.5));

  // n = 6 is the fewest with a 95% interval: [min, max] covers 1 - 2/64.
  const MedianInterval six = median_confidence_interval({6, 5, 4, 3, 2, 1});
  REQUIRE(six.valid);
  CHECK(six.low == 1);
  CHECK(six.high == 6);
  CHECK(six.coverage == Approx(1 - 2.0 / 64));

  // n = 5: even [min, max] covers only 1 - 2/32 = 0.9375.
  const MedianInterval five = median_confidence_interval({1, 2, 3, 4, 5});
  CHECK_FALSE(five.valid);
  CHECK(std::isinf(relative_half_width(five)));
  CHECK(median_confidence_interval({}).valid == false);
}

TEST_CASE("a large sample's interval is about median +- 1.96 sqrt(n)/2 ranks", "[statistics]") {
  std::vector<double> ranks;
  for (int i = 1; i <= 10000; ++i) ranks.push_back(i);
  const MedianInterval interval = median_confidence_interval(ranks);
  REQUIRE(interval.valid);
  // The normal approximation: k = n/2 - 1.96 sqrt(n)/2 = 4902; exact sums land within a rank.
  CHECK(interval.low == Approx(4902).margin(2));
  CHECK(interval.high == Approx(10001 - 4902).margin(2));
  CHECK(interval.coverage >= 0.95);
  CHECK(interval.coverage < 0.952);
}

TEST_CASE("over many seeded draws the interval covers the true median at least 95% of the time",
          "[statistics]") {
  // Skewed like timings: a floor plus an exponential tail; the true median is 1 + ln 2.
  std::mt19937_64 rng(20240611);
  std::exponential_distribution<double> tail(1.0);
  const double true_median = 1 + std::log(2.0);
  for (int n : {8, 25, 101}) {
    int covered = 0;
    constexpr int draws = 4000;
    for (int draw = 0; draw < draws; ++draw) {
      std::vector<double> samples;
      for (int i = 0; i < n; ++i) samples.push_back(1 + tail(rng));
      const MedianInterval interval = median_confidence_interval(samples);
      REQUIRE(interval.valid);
      covered += interval.low <= true_median && true_median <= interval.high;
    }
    INFO("n = " << n << ": covered " << covered << " of " << draws);
    // Coverage is at least 95% by construction; allow 3 binomial standard errors of sampling.
    CHECK(covered >= 0.95 * draws - 3 * std::sqrt(draws * 0.95 * 0.05));
  }
}

TEST_CASE("the relative half-width shrinks as samples are added", "[statistics]") {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(10.0, 0.5);
  std::vector<double> samples;
  for (int i = 0; i < 20; ++i) samples.push_back(noise(rng));
  const double few = relative_half_width(median_confidence_interval(samples));
  for (int i = 0; i < 2000; ++i) samples.push_back(noise(rng));
  const double many = relative_half_width(median_confidence_interval(samples));
  CHECK(many < few / 4);
  CHECK(many < 0.01);
}

}  // namespace
}  // namespace attnbench
