// The passes per timing sample (harness/measure/sample_runs.h), and that the timing loop times
// and records the samples an executor runs back to back, with a fake executor: nothing runs.
#include "harness/measure/sample_runs.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "harness/measure/interleaved_timing.h"
#include "harness/measure/timing.h"

namespace attnbench {
namespace {

TEST_CASE("a sample holds the fewest passes that last the sample time", "[timing]") {
  CHECK(runs_per_sample(0.01, 1.0) == 100);
  CHECK(runs_per_sample(0.3, 1.0) == 4);  // 1.2 ms: three would be 0.9
  CHECK(runs_per_sample(0.25, 1.0) == 4);
  CHECK(runs_per_sample(1.0, 1.0) == 1);
  CHECK(runs_per_sample(40.0, 1.0) == 1);  // a long pass is its own sample
  for (double run_ms = 0.002; run_ms < 3.0; run_ms *= 1.37) {
    const int64_t runs = runs_per_sample(run_ms, 1.0);
    CHECK(static_cast<double>(runs) * run_ms >= 1.0);
    if (runs > 1) CHECK(static_cast<double>(runs - 1) * run_ms < 1.0);
  }
  CHECK(runs_per_sample(0.05) == static_cast<int64_t>(std::ceil(min_sample_ms / 0.05)));
}

TEST_CASE("a pass too short to time, or a bad time, gets the most passes", "[timing]") {
  CHECK(runs_per_sample(1e-7, 1.0, 500) == 500);
  CHECK(runs_per_sample(0.0, 1.0, 500) == 500);
  CHECK(runs_per_sample(-1.0, 1.0, 500) == 500);
  CHECK(runs_per_sample(std::numeric_limits<double>::quiet_NaN()) == max_runs_per_sample);
}

// Returns pass_ms for every sample, as a mean over `runs` passes it says it ran.
class BackToBackExecutor final : public Executor {
 public:
  BackToBackExecutor(double pass_ms, int64_t runs) : pass_ms_(pass_ms), runs_(runs) {}
  void load(const HostTensors&, bool) override {}
  Problem problem(float) const override { return Problem{}; }
  void poison_outputs() override {}
  double timed_run_ms(Variant&, const Problem&) override { return pass_ms_; }
  int64_t runs_per_sample() const override { return runs_; }
  void fetch_outputs(std::vector<float>&, std::vector<float>*) override {}
  void fetch_gradients(std::vector<float>&, std::vector<float>&, std::vector<float>&) override {}
  void flush_cache() override {}
  Workspace& workspace() override { throw std::logic_error("no workspace"); }

 private:
  double pass_ms_;
  int64_t runs_;
};

class IdleVariant final : public Variant {
 public:
  VariantInfo info() const override { return {"idle", Device::cpu, "does nothing", {}}; }
  std::size_t workspace_bytes(const Shape&) const override { return 0; }
  void prepare(const Shape&, Workspace&) override {}
  void run(const Problem&) override {}
};

TEST_CASE("samples of many passes: per-pass times, the sample's length fills min_time",
          "[timing]") {
  TimingOptions options;
  options.min_time_s = 0.02;
  IdleVariant variant;
  BackToBackExecutor one_pass(0.01, 1), hundred_passes(0.01, 100);
  const TimedBatch single = time_batch("single", variant, one_pass, Problem{}, options, 1);
  const TimedBatch batched = time_batch("batched", variant, hundred_passes, Problem{}, options, 1);
  CHECK(single.runs_per_sample == 1);
  CHECK(batched.runs_per_sample == 100);
  for (double ms : batched.samples_ms) CHECK(ms == 0.01);
  // 20 ms of samples: about 2000 single passes, about 20 samples of 100 passes (1 ms each).
  CHECK(single.samples_ms.size() >= 1000);
  CHECK(batched.samples_ms.size() <= 100);
  CHECK(summarise_batches(batched, options).runs_per_sample == 100);
}

// Counts the passes it is asked for: what a repetition count really ran.
class CountingExecutor final : public Executor {
 public:
  explicit CountingExecutor(double pass_ms) : pass_ms_(pass_ms) {}
  void load(const HostTensors&, bool) override {}
  Problem problem(float) const override { return Problem{}; }
  void poison_outputs() override {}
  double timed_run_ms(Variant&, const Problem&) override {
    ++calls;
    return pass_ms_;
  }
  int64_t runs_per_sample() const override { return 1; }
  void fetch_outputs(std::vector<float>&, std::vector<float>*) override {}
  void fetch_gradients(std::vector<float>&, std::vector<float>&, std::vector<float>&) override {}
  void flush_cache() override {}
  Workspace& workspace() override { throw std::logic_error("no workspace"); }
  int64_t calls = 0;

 private:
  double pass_ms_;
};

TEST_CASE("a repetition count is the repetitions recorded, never the calibration probes",
          "[timing]") {
  IdleVariant variant;
  for (const int64_t repetitions : {1, 2, 5}) {
    TimingOptions options;
    options.min_time_s = 0.01;
    CountingExecutor executor(1.0);  // 10 passes of 1 ms fill min_time
    const TimedBatch batch =
        time_batch("counted", variant, executor, Problem{}, options, repetitions);
    CHECK(static_cast<int64_t>(batch.repetition_means_ms.size()) == repetitions);
    CHECK(static_cast<int64_t>(batch.samples_ms.size()) == 10 * repetitions);
    CHECK(executor.calls == 10 * repetitions + 1);  // the one sample that set the count
    CHECK(summarise_batches(batch, options).repetitions == repetitions);
  }
}

TEST_CASE("the iterations that fill min_time", "[timing]") {
  CHECK(iterations_filling(0.1, 0.01) == 10);
  CHECK(iterations_filling(0.1, 0.03) == 4);
  CHECK(iterations_filling(0.1, 5.0) == 1);
  CHECK(iterations_filling(0.1, 0.0) == max_iterations_per_repetition);
  CHECK(iterations_filling(1e9, 1e-9) == max_iterations_per_repetition);
}

TEST_CASE("interleaved rounds keep their samples' pass count", "[timing]") {
  TimingOptions options;
  options.repetitions = 2;
  const std::vector<TimingStats> stats = time_interleaved(2, options, [](std::size_t variant) {
    TimedBatch batch;
    batch.samples_ms = {1.0, 1.0};
    batch.runs_per_sample = variant == 0 ? 1 : 25;
    return batch;
  });
  CHECK(stats[0].runs_per_sample == 1);
  CHECK(stats[1].runs_per_sample == 25);
}

}  // namespace
}  // namespace attnbench
