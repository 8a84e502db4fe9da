// The start check retaken while other work disturbs it (start_peaks.h), on made-up checks: no
// timing, so the test says the same on a busy machine as on a quiet one.
#include "harness/measure/start_peaks.h"

#include <catch2/catch.hpp>
#include <vector>

namespace attnbench {
namespace {

using Catch::Matchers::Contains;

CpuPeaks check_with(double best, double sustained) {
  CpuPeaks peaks;
  peaks.fma_gflops_all_threads = best;
  peaks.fma_sustained_gflops_all_threads = sustained;
  return peaks;
}

// A `measure` that hands out `checks` in order and counts its calls.
struct Sequence {
  std::vector<CpuPeaks> checks;
  int calls = 0;
  CpuPeaks operator()() { return checks.at(static_cast<std::size_t>(calls++)); }
};

TEST_CASE("a clean start check is taken once and says nothing", "[peaks][start]") {
  Sequence sequence{{check_with(200, 190)}};
  const StartPeaks start = measure_start_peaks(std::ref(sequence), 3, 0);
  CHECK(sequence.calls == 1);
  CHECK(start.attempts == 1);
  CHECK(start.clean);
  CHECK(start.note.empty());
  CHECK(start.peaks.fma_sustained_gflops_all_threads == 190);
}

TEST_CASE("a disturbed start check is retaken until one ran alone", "[peaks][start]") {
  // The second attempt's best trial is lower than the first's: what counts is that it ran alone.
  Sequence sequence{{check_with(240, 120), check_with(230, 220), check_with(250, 250)}};
  const StartPeaks start = measure_start_peaks(std::ref(sequence), 3, 0);
  CHECK(sequence.calls == 2);
  CHECK(start.clean);
  CHECK(start.attempts == 2);
  CHECK(start.peaks.fma_gflops_all_threads == 230);
  CHECK_THAT(start.note, Contains("clean on attempt 2 of 3") && Contains("50%, 96%"));
}

TEST_CASE("a start check never clean keeps the least disturbed and says so", "[peaks][start]") {
  Sequence sequence{{check_with(200, 100), check_with(200, 160), check_with(200, 120)}};
  const StartPeaks start = measure_start_peaks(std::ref(sequence), 3, 0);
  CHECK(sequence.calls == 3);
  CHECK_FALSE(start.clean);
  CHECK(start.attempts == 3);
  CHECK(start.peaks.fma_sustained_gflops_all_threads == 160);
  CHECK_THAT(start.note, Contains("no clean check in 3 attempts") && Contains("50%, 80%, 60%") &&
                             Contains("disturbed"));
}

TEST_CASE("a check that measured nothing never counts as alone", "[peaks][start]") {
  CHECK_FALSE(ran_alone(CpuPeaks{}));
  CHECK(sustained_fraction(CpuPeaks{}) == 0);
  CHECK(ran_alone(check_with(100, 90)));
  CHECK_FALSE(ran_alone(check_with(100, 89)));
}

}  // namespace
}  // namespace attnbench
