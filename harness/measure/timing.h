// Timing one prepared case with Google Benchmark: it picks the iteration count to fill
// min_time_s per repetition; each iteration is timed by the executor (wall clock on the CPU,
// CUDA events on the GPU) and reported as manual time. With a target, repetitions are added
// until the median's confidence interval is narrow enough or the time allowed is spent (the
// stopping rule of nvbench).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/core/timing_options.h"
#include "harness/core/timing_stats.h"
#include "harness/measure/executor.h"
#include "harness/variant/variant.h"

namespace attnbench {

// The iteration times of some Google Benchmark repetitions of one case, and each one's mean.
struct TimedBatch {
  std::vector<double> samples_ms;  // per pass
  std::vector<double> repetition_means_ms;
  int64_t runs_per_sample = 1;  // the most passes any sample held (Executor::runs_per_sample)
};

// The most iterations one repetition runs: a pass that times as 0 still ends (and its samples
// fit in memory).
inline constexpr int64_t max_iterations_per_repetition = 1'000'000;

// The iterations whose samples of `sample_s` seconds each fill `min_time_s` (at least one).
int64_t iterations_filling(double min_time_s, double sample_s);

// `repetitions` Google Benchmark repetitions of min_time_s each, no warm-up: one sample, kept
// nowhere, sets the iteration count, and every repetition runs exactly that many. Throws
// std::runtime_error (or DeviceLostError) if a run fails.
TimedBatch time_batch(const std::string& name, Variant& variant, Executor& executor,
                      const Problem& problem, const TimingOptions& options, int64_t repetitions);

// Warm-up, then batches until the stopping rule is met. Throws as time_batch does.
TimingStats time_case(const std::string& name, Variant& variant, Executor& executor,
                      const Problem& problem, const TimingOptions& options);

// Median, min, max, coefficient of variation and the median's 95% confidence interval of
// samples (non-empty).
TimingStats summarise(std::vector<double> samples_ms);

// The samples and repetition means so far as statistics, with the stopping rule's verdict.
TimingStats summarise_batches(const TimedBatch& batches, const TimingOptions& options);

// The stopping rule: stop once the target is reached (or there is none), or once max_time_s of
// sampling is spent.
bool sampling_done(const TimingStats& stats, double seconds_spent, const TimingOptions& options);

}  // namespace attnbench
