#include "harness/measure/timing.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "harness/measure/statistics.h"

namespace attnbench {

namespace {

// Collects nothing and prints nothing: we keep our own per-iteration samples.
class SilentReporter final : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

void append(TimedBatch& into, const TimedBatch& batch) {
  into.samples_ms.insert(into.samples_ms.end(), batch.samples_ms.begin(), batch.samples_ms.end());
  into.repetition_means_ms.insert(into.repetition_means_ms.end(), batch.repetition_means_ms.begin(),
                                  batch.repetition_means_ms.end());
  into.runs_per_sample = std::max(into.runs_per_sample, batch.runs_per_sample);
}

}  // namespace

TimingStats summarise(std::vector<double> samples) {
  TimingStats stats;
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  stats.iterations = static_cast<int64_t>(n);
  stats.min_ms = samples.front();
  stats.max_ms = samples.back();
  stats.median_ms = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  const double mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(n);
  double variance = 0;
  for (double s : samples) variance += (s - mean) * (s - mean);
  variance /= static_cast<double>(n > 1 ? n - 1 : 1);
  stats.cv = mean > 0 ? std::sqrt(variance) / mean : 0;
  const MedianInterval interval = median_confidence_interval(std::move(samples));
  stats.ci_valid = interval.valid;
  stats.ci_low_ms = interval.low;
  stats.ci_high_ms = interval.high;
  stats.rel_ci_half_width = interval.valid ? relative_half_width(interval) : 0;
  return stats;
}

TimingStats summarise_batches(const TimedBatch& batches, const TimingOptions& options) {
  TimingStats stats = summarise(batches.samples_ms);
  stats.repetitions = static_cast<int64_t>(batches.repetition_means_ms.size());
  stats.repetition_means_ms = batches.repetition_means_ms;
  stats.runs_per_sample = batches.runs_per_sample;
  stats.target_rel_ci = options.target_rel_ci;
  stats.target_reached = options.target_rel_ci > 0 && stats.ci_valid &&
                         stats.rel_ci_half_width <= options.target_rel_ci;
  return stats;
}

bool sampling_done(const TimingStats& stats, double seconds_spent, const TimingOptions& options) {
  if (options.target_rel_ci <= 0 || stats.target_reached) return true;
  return seconds_spent >= options.max_time_s;
}

int64_t iterations_filling(double min_time_s, double sample_s) {
  if (!(sample_s > 0)) return max_iterations_per_repetition;
  const double iterations = std::ceil(min_time_s / sample_s);
  return static_cast<int64_t>(
      std::clamp(iterations, 1.0, static_cast<double>(max_iterations_per_repetition)));
}

TimedBatch time_batch(const std::string& name, Variant& variant, Executor& executor,
                      const Problem& problem, const TimingOptions& options, int64_t repetitions) {
  // Google Benchmark finds a repetition's iteration count by probing (1, 10, 100, ... iterations
  // until min_time is filled) and calls the loop below for every probe: its samples and means
  // would be recorded as repetitions of their own (repetitions = 1 recorded 3 or 4). One sample,
  // timed here and kept nowhere, sets the count instead, and each repetition runs exactly that.
  const double probe_s = executor.timed_run_ms(variant, problem) *
                         static_cast<double>(executor.runs_per_sample()) / 1e3;
  const int64_t iterations = iterations_filling(options.min_time_s, probe_s);
  TimedBatch batch;
  std::string error;
  bool device_lost = false;
  benchmark::RegisterBenchmark(
      name.c_str(),
      [&](benchmark::State& state) {
        double total_ms = 0;
        for (auto _ : state) {
          if (options.cold) executor.flush_cache();
          double ms = 0;
          try {
            ms = executor.timed_run_ms(variant, problem);
          } catch (const DeviceLostError& lost) {
            error = lost.what();
            device_lost = true;
          } catch (const std::exception& failure) {
            error = failure.what();
          }
          if (!error.empty()) {
            state.SkipWithError(error.c_str());
            break;
          }
          // Google Benchmark fills min_time_s with the samples' own length, not the pass's.
          const int64_t runs = executor.runs_per_sample();
          state.SetIterationTime(ms * static_cast<double>(runs) / 1e3);
          batch.runs_per_sample = std::max(batch.runs_per_sample, runs);
          batch.samples_ms.push_back(ms);
          total_ms += ms;
        }
        if (state.iterations() > 0)
          batch.repetition_means_ms.push_back(total_ms / static_cast<double>(state.iterations()));
      })
      ->UseManualTime()
      ->Iterations(static_cast<benchmark::IterationCount>(iterations))
      ->Repetitions(static_cast<int>(repetitions));
  SilentReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::ClearRegisteredBenchmarks();

  if (device_lost) throw DeviceLostError(error);
  if (!error.empty()) throw std::runtime_error(error);
  if (batch.samples_ms.empty()) throw std::runtime_error("no timed iterations");
  return batch;
}

TimingStats time_case(const std::string& name, Variant& variant, Executor& executor,
                      const Problem& problem, const TimingOptions& options) {
  // The warm-up count is the user's, its time is bounded: it comes before the first timed run,
  // so no time budget would otherwise stop a huge count.
  double warmup_ms = 0;
  for (int64_t i = 0; i < options.warmup_runs && warmup_ms <= options.case_budget_s * 1e3; ++i)
    warmup_ms +=
        executor.timed_run_ms(variant, problem) * static_cast<double>(executor.runs_per_sample());

  const auto start = std::chrono::steady_clock::now();
  TimedBatch all = time_batch(name, variant, executor, problem, options, options.repetitions);
  TimingStats stats = summarise_batches(all, options);
  // One repetition at a time past the first batch: the interval narrows as sqrt(samples), so
  // small steps stop close to where the target is first met.
  while (!sampling_done(
      stats, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
      options)) {
    append(all, time_batch(name, variant, executor, problem, options, 1));
    stats = summarise_batches(all, options);
  }
  return stats;
}

}  // namespace attnbench
