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
  std::vector<double> repetition_means_ms;
};

// A spread wider than this is flagged in the record: the machine was too noisy to trust.
inline constexpr double noisy_cv = 0.10;

}  // namespace attnbench
