// What timing one case found: the statistics every record carries.
#pragma once

#include <cstdint>
#include <vector>

namespace attnbench {

struct TimingStats {
  double median_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  double cv = 0;  // standard deviation / mean over all timed iterations
  int64_t iterations = 0;
  int64_t repetitions = 0;
  // Each repetition's mean: in an interleaved run, one per round, in round order, so two
  // variants' rounds pair up (they ran seconds apart, under the same load).
  std::vector<double> repetition_means_ms;
  // The median's 95% confidence interval from order statistics; not valid under 6 iterations.
  bool ci_valid = false;
  double ci_low_ms = 0;
  double ci_high_ms = 0;
  double rel_ci_half_width = 0;  // (high - low) / 2 / median
  // The stopping rule: sample until rel_ci_half_width <= target_rel_ci or max_time_s is spent.
  double target_rel_ci = 0;  // 0: no target (a fixed number of repetitions)
  bool target_reached = false;
  bool interleaved = false;  // timed in rounds alternating with the other variants of its shape
  // Back-to-back passes in one sample; every time above is per pass (the sample's / this).
  int64_t runs_per_sample = 1;
};

// A spread wider than this is flagged in the record: the machine was too noisy to trust.
inline constexpr double noisy_cv = 0.10;

}  // namespace attnbench
