#include "harness/runner/peak_check_schedule.h"

#include <algorithm>

#include "harness/results/peak_checks.h"

namespace attnbench {

PeakCheckSchedule::PeakCheckSchedule(const MeasureConfig& measure, MeasuredPeaks& peaks,
                                     RunFolder& folder)
    : measure_(measure),
      peaks_(peaks),
      folder_(folder),
      last_check_(std::chrono::steady_clock::now()) {
  raise_peaks();
}

// The peaks chosen between (the bf16 peak where it beats the FMA's) are the best so far.
void PeakCheckSchedule::raise_peaks() {
  const PeakChecks& checks = folder_.peak_checks();
  peaks_.cpu_gflops = std::max(peaks_.cpu_gflops, checks.best("cpu_fma_gflops"));
  peaks_.cpu_bf16_gflops = std::max(peaks_.cpu_bf16_gflops, checks.best("cpu_bf16_dot_gflops"));
  peaks_.cpu_amx_bf16_gflops =
      std::max(peaks_.cpu_amx_bf16_gflops, checks.best("cpu_amx_bf16_gflops"));
}

void PeakCheckSchedule::check(const std::string& when) {
  if (peaks_.skipped) return;
  folder_.append_peak_check(measure_peak_check(when, peaks_.cpu_bandwidth));
  nlohmann::ordered_json manifest = folder_.manifest();
  write_peaks_summary(manifest, folder_.peak_checks());
  folder_.write_manifest(manifest);
  raise_peaks();
}

void PeakCheckSchedule::before_group(const std::string& variant) {
  // Between variants (or, interleaved, between shapes) of a long run: a peak that drifted since
  // the start shows here, not only at the end.
  const bool new_variant = measure_.interleave || variant != previous_variant_;
  const double since_check =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - last_check_).count();
  if (!previous_variant_.empty() && new_variant && since_check >= measure_.peak_check_interval_s) {
    check("between variants");
    last_check_ = std::chrono::steady_clock::now();
  }
  previous_variant_ = variant;
}

}  // namespace attnbench
