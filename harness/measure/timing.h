// Timing one prepared case with Google Benchmark: it picks the iteration count to fill
// min_time_s per repetition; each iteration is timed by the executor (wall clock on the CPU,
// CUDA events on the GPU) and reported as manual time.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/core/timing_stats.h"
#include "harness/measure/executor.h"
#include "harness/variant/variant.h"

namespace attnbench {

struct TimingOptions {
  int64_t warmup_runs = 1;
  double warmup_budget_s = 60;  // warm-up stops early once it has taken this long
  int64_t repetitions = 3;
  double min_time_s = 0.1;
  bool cold = false;  // flush the cache before every timed run
};

// Throws std::runtime_error (or DeviceLostError) if a run fails.
TimingStats time_case(const std::string& name, Variant& variant, Executor& executor,
                      const Problem& problem, const TimingOptions& options);

// Median, min, max and coefficient of variation of samples (non-empty).
TimingStats summarise(std::vector<double> samples_ms);

}  // namespace attnbench
