#include "harness/measure/start_peaks.h"

#include <fmt/format.h>

#include <chrono>
#include <thread>

namespace attnbench {

double sustained_fraction(const CpuPeaks& peaks) {
  if (!(peaks.fma_gflops_all_threads > 0)) return 0;
  return peaks.fma_sustained_gflops_all_threads / peaks.fma_gflops_all_threads;
}

bool ran_alone(const CpuPeaks& peaks) {
  return sustained_fraction(peaks) >= alone_sustained_fraction;
}

StartPeaks measure_start_peaks(const std::function<CpuPeaks()>& measure, int attempts,
                               int pause_ms) {
  StartPeaks start;
  std::string fractions;
  for (int attempt = 1; attempt <= std::max(attempts, 1); ++attempt) {
    if (attempt > 1) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    const CpuPeaks peaks = measure();
    start.attempts = attempt;
    fractions +=
        fmt::format("{}{:.0f}%", fractions.empty() ? "" : ", ", 100 * sustained_fraction(peaks));
    if (attempt == 1 || sustained_fraction(peaks) > sustained_fraction(start.peaks))
      start.peaks = peaks;
    if (ran_alone(peaks)) {
      start.clean = true;
      break;
    }
  }
  if (start.clean && start.attempts > 1) {
    start.note = fmt::format(
        "clean on attempt {} of {} (the FMA loop sustained {} of its best trial; under {:.0f}% "
        "other work ran)",
        start.attempts, attempts, fractions, 100 * alone_sustained_fraction);
  } else if (!start.clean) {
    start.note = fmt::format(
        "no clean check in {} attempts (the FMA loop sustained {} of its best trial, under "
        "{:.0f}%: other work ran); the least disturbed is kept and the run's records will read "
        "disturbed",
        start.attempts, fractions, 100 * alone_sustained_fraction);
  }
  return start;
}

}  // namespace attnbench
