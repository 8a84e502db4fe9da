// When a sweep re-checks the CPU's peaks, and what it keeps of them: a check between variants
// (between shapes when interleaved) once measure.peak_check_interval_s has passed since the last,
// and one at the end; each check is appended to the folder, its summary written to the manifest,
// and the run's peaks raised to the best so far (a check taken while something else ran reads
// low and must not stand as the peak).
#pragma once

#include <chrono>
#include <string>

#include "harness/plan/config.h"
#include "harness/results/manifest.h"
#include "harness/results/run_folder.h"

namespace attnbench {

class PeakCheckSchedule {
 public:
  // `peaks`: the run's peaks, raised by every check; none is taken when peaks.skipped.
  PeakCheckSchedule(const MeasureConfig& measure, MeasuredPeaks& peaks, RunFolder& folder);

  // Before each timing group of `variant`: a check "between variants" when one is due.
  void before_group(const std::string& variant);
  // Takes, appends and summarises a check named `when` ("end").
  void check(const std::string& when);

 private:
  void raise_peaks();

  const MeasureConfig& measure_;
  MeasuredPeaks& peaks_;
  RunFolder& folder_;
  std::chrono::steady_clock::time_point last_check_;
  std::string previous_variant_;
};

}  // namespace attnbench
