#include "harness/measure/timing.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace attnbench {

namespace {

// Collects nothing and prints nothing: we keep our own per-iteration samples.
class SilentReporter final : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

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
  return stats;
}

TimingStats time_case(const std::string& name, Variant& variant, Executor& executor,
                      const Problem& problem, const TimingOptions& options) {
  // The warm-up count is the user's, its time is bounded: it comes before the first timed run,
  // so no time budget would otherwise stop a huge count.
  double warmup_ms = 0;
  for (int64_t i = 0; i < options.warmup_runs && warmup_ms <= options.warmup_budget_s * 1e3; ++i)
    warmup_ms += executor.timed_run_ms(variant, problem);

  std::vector<double> samples;
  std::vector<double> repetition_means;
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
          state.SetIterationTime(ms / 1e3);
          samples.push_back(ms);
          total_ms += ms;
        }
        if (state.iterations() > 0)
          repetition_means.push_back(total_ms / static_cast<double>(state.iterations()));
      })
      ->UseManualTime()
      ->MinTime(options.min_time_s)
      ->Repetitions(static_cast<int>(options.repetitions));
  SilentReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::ClearRegisteredBenchmarks();

  if (device_lost) throw DeviceLostError(error);
  if (!error.empty()) throw std::runtime_error(error);
  if (samples.empty()) throw std::runtime_error("no timed iterations");
  TimingStats stats = summarise(samples);
  stats.repetitions = options.repetitions;
  stats.repetition_means_ms = repetition_means;
  return stats;
}

}  // namespace attnbench
