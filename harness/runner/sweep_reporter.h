// What a sweep tells the world while it runs, as events (as google/benchmark's reporters): the
// runner measures and emits; reporters print (TerminalReporter) or store (FolderWriter). A new
// output (a live JSON stream, a dashboard) is a reporter, not a change to the runner.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/core/record.h"
#include "harness/results/peak_checks.h"

namespace attnbench {

struct RunStarted {
  int64_t total_cases = 0;              // the sweep's, finished ones included
  int64_t already_done = 0;             // in the folder before this session
  std::vector<std::string> cpu_dtypes;  // of the CPU cases to run, in order of appearance
  const PeakChecks* checks = nullptr;   // the folder's so far
};

struct CaseFinished {
  const CaseRecord* record = nullptr;
  const nlohmann::ordered_json* stored = nullptr;  // the record as cases.jsonl holds it
  const PeakChecks* checks = nullptr;  // the folder's as they stand: what it is rated against now
};

struct RunEnded {
  int64_t session_records = 0;  // records this session made
  bool peaks_skipped = false;   // measure.peaks = skip: nothing is rated
  // With an end check: the checks before it and after it, and the session's records that the
  // final checks flag as disturbed. Null without one.
  const PeakChecks* before_end = nullptr;
  const PeakChecks* checks = nullptr;
  int64_t disturbed = 0;
};

class SweepReporter {
 public:
  virtual ~SweepReporter() = default;
  virtual void run_started(const RunStarted& event) = 0;
  virtual void case_finished(const CaseFinished& event) = 0;
  virtual void run_ended(const RunEnded& event) = 0;
};

}  // namespace attnbench
