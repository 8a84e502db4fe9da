// The CPU peaks a run measures at its start, between variants and at its end. A peak measured
// once, while something else ran, rescales every "% of peak" of the run without a word (records
// at 176% were seen); measured again, a disturbed check shows as a disagreement. Records are
// read against the best check, and a run whose checks disagree is flagged as disturbed.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/record.h"

namespace attnbench {

struct PeakCheck {
  std::string when;           // "start", "resume", "between variants", "end"
  std::string date;           // UTC, ISO 8601
  double cpu_fma_gflops = 0;  // the best short trial: what the machine can do
  // The FMA loop's rate over all its trials: below the best, something else ran during the check.
  double cpu_fma_sustained_gflops = 0;
  double cpu_bf16_dot_gflops = 0;   // 0 without AVX512_BF16
  std::optional<double> load_1min;  // the load average when it was taken
};

// Checks further apart than this (highest over lowest, minus one) flag the run.
inline constexpr double peak_disagreement_limit = 0.10;

class PeakChecks {
 public:
  void add(PeakCheck check) { checks_.push_back(std::move(check)); }
  const std::vector<PeakCheck>& checks() const { return checks_; }

  // The best check of a peak ("cpu_fma_gflops" or "cpu_bf16_dot_gflops"): interference only
  // slows a measurement down, so the highest is the machine's; 0 for other names or no checks.
  double best(const std::string& peak_name) const;

  // "cpu_fma_gflops checks disagree: 114 (start) to 235 (end) GFLOP/s, 106% apart", or empty
  // when they are within peak_disagreement_limit (or there is only one).
  std::string disagreement(const std::string& peak_name) const;

  // "other work ran during the end check: the FMA loop sustained 190 of its best 380 GFLOP/s",
  // for each check whose sustained rate is over peak_disagreement_limit below its best; empty
  // when none is.
  std::string busy_checks() const;

  // Every reason the checks give to doubt a record read against `peak_name`: disagreement and
  // busy_checks, joined by "; ".
  std::string doubts(const std::string& peak_name) const;

  nlohmann::ordered_json to_json() const;
  // Reads what to_json wrote; an absent or malformed list gives no checks.
  static PeakChecks from_json(const nlohmann::ordered_json& list);

 private:
  std::vector<PeakCheck> checks_;
};

// Measures the all-thread CPU peaks now (about a third of a second), with the load average.
PeakCheck measure_peak_check(const std::string& when);

// Reads a CPU record against the best check of its peak and notes the checks' doubts (which
// record_schema turns into "disturbed"); a GPU record is left as it is.
void rate_against_peaks(CaseRecord& record, const PeakChecks& checks);

// The manifest's "peak_checks" list, and its CPU peaks set to the best checks.
void write_peak_checks(nlohmann::ordered_json& manifest, const PeakChecks& checks);

}  // namespace attnbench
