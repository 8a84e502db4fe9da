// Timing one prepared case with Google Benchmark: it picks the iteration count to fill
// min_time_s per repetition; each iteration is timed by the executor (wall clock on the CPU,
// CUDA events on the GPU) and reported as manual time.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/executor.h"
#include "harness/variant.h"

namespace attnbench {

struct TimingOptions {
  int64_t warmup_runs = 1;
  double warmup_budget_s = 60;  // warm-up stops early once it has taken this long
  int64_t repetitions = 3;
  double min_time_s = 0.1;
  bool cold = false;  // flush the cache before every timed run
};

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

// Throws std::runtime_error (or DeviceLostError) if a run fails.
TimingStats time_case(const std::string& name, Variant& variant, Executor& executor,
                      const Problem& problem, const TimingOptions& options);

// Median, min, max and coefficient of variation of samples (non-empty).
TimingStats summarise(std::vector<double> samples_ms);

}  // namespace attnbench
