// How one case is timed: warm-up, repetitions and the stopping rule. The [measure] settings of a
// config land here directly (harness/plan/settings.cpp), and timing reads them as they are.
#pragma once

#include <cstdint>

namespace attnbench {

struct TimingOptions {
  int64_t warmup_runs = 1;  // untimed runs before timing
  // The case's time budget: warm-up stops early once it has taken this long, and the sweep skips
  // a case predicted to take longer.
  double case_budget_s = 10;
  int64_t repetitions = 3;  // the first batch; with a target, the least there will be
  double min_time_s = 0.1;  // per repetition; Google Benchmark picks the iteration count
  bool cold = false;        // evict the case's buffers from the caches before every timed run
  // Keep adding repetitions until the median's 95% interval has a relative half-width at most
  // this (0: no target, exactly `repetitions`) or max_time_s of timed runs is spent.
  double target_rel_ci = 0;
  double max_time_s = 10;
};

}  // namespace attnbench
