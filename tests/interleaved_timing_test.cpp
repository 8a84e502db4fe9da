// The stopping rule and the round order of interleaved timing, driven by fake rounds that return
// synthetic samples: deterministic, nothing is timed.
#include "harness/measure/interleaved_timing.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "harness/measure/timing.h"

namespace attnbench {
namespace {

TimingOptions target_options(double target, int64_t repetitions) {
  TimingOptions options;
  options.repetitions = repetitions;
  options.target_rel_ci = target;
  options.max_time_s = 1e9;  // never the reason to stop in these tests
  return options;
}

TEST_CASE("the stopping rule: the target, or the time allowed", "[timing]") {
  TimedBatch batch;
  for (int i = 0; i < 50; ++i) batch.samples_ms.push_back(10 + (i % 2 ? 0.05 : -0.05));
  batch.repetition_means_ms = {10, 10};

  const TimingStats tight = summarise_batches(batch, target_options(0.02, 2));
  CHECK(tight.ci_valid);
  CHECK(tight.rel_ci_half_width <= 0.02);
  CHECK(tight.target_reached);
  CHECK(tight.repetitions == 2);
  CHECK(sampling_done(tight, 0.0, target_options(0.02, 2)));

  const TimingStats strict = summarise_batches(batch, target_options(0.001, 2));
  CHECK_FALSE(strict.target_reached);
  CHECK_FALSE(sampling_done(strict, 1.0, target_options(0.001, 2)));
  TimingOptions short_budget = target_options(0.001, 2);
  short_budget.max_time_s = 1;
  CHECK(sampling_done(strict, 1.0, short_budget));  // time is up: stop, target not reached

  // No target: one batch of `repetitions`, and target_reached stays false.
  const TimingStats untargeted = summarise_batches(batch, target_options(0, 2));
  CHECK_FALSE(untargeted.target_reached);
  CHECK(sampling_done(untargeted, 0.0, target_options(0, 2)));

  // Under 6 samples there is no 95% interval: never "reached".
  TimedBatch few;
  few.samples_ms = {10, 10, 10};
  few.repetition_means_ms = {10};
  CHECK_FALSE(summarise_batches(few, target_options(0.5, 1)).target_reached);
}

TEST_CASE("rounds run every variant in the listed order: A B C A B C", "[timing]") {
  CHECK(round_order(3, 0) == std::vector<std::size_t>{0, 1, 2});
  CHECK(round_order(3, 7) == std::vector<std::size_t>{0, 1, 2});

  std::string calls;
  const auto stats = time_interleaved(3, target_options(0, 4), [&](std::size_t i) {
    calls += static_cast<char>('A' + i);
    TimedBatch batch;
    batch.samples_ms = {1.0 + static_cast<double>(i), 2.0 + static_cast<double>(i)};
    return batch;
  });
  CHECK(calls == "ABCABCABCABC");  // exactly `repetitions` rounds without a target
  REQUIRE(stats.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(stats[i].interleaved);
    CHECK(stats[i].repetitions == 4);
    CHECK(stats[i].iterations == 8);
    CHECK(stats[i].repetition_means_ms == std::vector<double>(4, 1.5 + static_cast<double>(i)));
  }
}

TEST_CASE("interleaved rounds continue until every variant meets the target", "[timing]") {
  // Variant 0 is steady; variant 1 alternates 10% either side, so its interval needs many rounds.
  int rounds_of_1 = 0;
  const auto stats = time_interleaved(2, target_options(0.02, 3), [&](std::size_t i) {
    TimedBatch batch;
    if (i == 0) {
      batch.samples_ms = {5, 5, 5};
    } else {
      ++rounds_of_1;
      const double wobble = rounds_of_1 % 2 ? 1.1 : 0.9;
      batch.samples_ms = {10 * wobble, 10, 10 / wobble};
    }
    return batch;
  });
  CHECK(stats[0].target_reached);
  CHECK(stats[1].target_reached);
  CHECK(rounds_of_1 > 3);  // more than the minimum: the target needed them
  CHECK(stats[0].repetitions == stats[1].repetitions);  // the rounds stay paired
}

TEST_CASE("interleaved rounds stop when the time allowed is spent", "[timing]") {
  TimingOptions options = target_options(0.0001, 2);
  options.max_time_s = 0;  // spent at once: only the minimum rounds
  int calls = 0;
  const auto stats = time_interleaved(2, options, [&](std::size_t i) {
    ++calls;
    TimedBatch batch;
    batch.samples_ms = {1.0 + static_cast<double>(i) * 0.5, 3.0};
    return batch;
  });
  CHECK(calls == 4);
  CHECK_FALSE(stats[0].target_reached);
}

}  // namespace
}  // namespace attnbench
