// Runs a sweep's cases: skip what cannot run (unsupported, over the memory cap, over the time
// budget) with the reason; check each case against the oracle before timing; time it (alone, or
// in rounds with the other variants of its shape); re-check after timing; append its record.
// The CPU peaks are re-checked between variants and at the end, and every record of the run is
// read against the best of them.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/core/distribution.h"
#include "harness/core/host_tensors.h"
#include "harness/core/record.h"
#include "harness/measure/executor.h"
#include "harness/measure/timing.h"
#include "harness/plan/config.h"
#include "harness/plan/sweep.h"
#include "harness/results/manifest.h"
#include "harness/results/peak_checks.h"
#include "harness/results/run_folder.h"
#include "harness/runner/case_budget.h"
#include "harness/runner/sweep_reporter.h"

namespace attnbench {

struct SweepOutcome {
  int64_t ok = 0, skipped = 0, failed = 0, already_done = 0;
  int64_t failed_earlier = 0;  // of already_done: failed records a resumed run keeps as they are
  int64_t disturbed = 0;     // records of this session rated disturbed against the folder's checks
  bool device_lost = false;  // the sweep stopped early; finished cases are kept
};

class SweepRunner {
 public:
  SweepRunner(const SweepConfig& config, const MeasuredPeaks& peaks);

  // Times every case not already in `folder`, appending a record per case. The folder holds the
  // peak checks so far (this session's first among them); the runner appends the others (between
  // variants, at the end), keeps the manifest's peaks summary up to date, and writes summary.csv
  // once, at the end.
  // The folder written by a FolderWriter, the run printed by a TerminalReporter.
  SweepOutcome run(const std::vector<Case>& cases, RunFolder& folder);
  // The same run telling `reporters`, in order, what happens.
  SweepOutcome run(const std::vector<Case>& cases, RunFolder& folder,
                   const std::vector<SweepReporter*>& reporters);

  // Oracle only, on every input distribution, no timing and no results folder: one record per
  // case and distribution, each with that distribution's name and its own errors. With
  // `records`, the records are collected there and no table is printed (progress still is, on
  // stderr when interactive).
  SweepOutcome check(const std::vector<Case>& cases, std::vector<CaseRecord>* records = nullptr);

 private:
  // A case prepared and checked, waiting to be timed.
  struct PreparedCase {
    CaseRecord record;
    std::unique_ptr<Variant> variant;
    HostTensors inputs;  // checked on them; timed on them
    bool ready = false;  // passed the oracle: time it
  };

  // Skips, prepares and checks `c` on inputs drawn from `distribution`; the variant's memory
  // stays in the executor's workspace. With `shared_inputs`, checks on those (the inputs its
  // interleaved group is timed on, drawn from the config's distribution). A
  // non-empty `skip` skips it with that reason when it has none of its own (its group's inputs
  // could not be made).
  PreparedCase prepare_case(const Case& c, bool timed, Distribution distribution,
                            const HostTensors* shared_inputs, const std::string& skip);
  CaseRecord run_case(const Case& c, bool timed, Distribution distribution);
  // measure.distribution: what a run times its cases on.
  Distribution configured_distribution() const;
  // The cases of one shape (one device), timed in alternating rounds.
  std::vector<CaseRecord> run_interleaved(const std::vector<Case>& group);
  // A run_case or run_interleaved, with a lost device turned into failed records; counts the
  // statuses in `outcome`.
  std::vector<CaseRecord> run_group_and_tally(const std::vector<Case>& group, bool timed,
                                              Distribution distribution, SweepOutcome& outcome);
  std::string skip_reason(const Case& c, const Variant& variant, bool timed) const;
  Executor& executor_for(Device device);
  void recheck_after_timing(PreparedCase& prepared, Executor& executor);
  // An ok record's time per run: the time budget scales it to predict its variant's next case.
  void keep_time_for_predictions(const CaseRecord& record);
  void release_workspace(Device device);

  const SweepConfig& config_;
  MeasuredPeaks peaks_;
  std::map<std::string, ObservedCase> last_finished_;  // by variant
  std::map<Device, std::unique_ptr<Executor>> executors_;
};

// The cases grouped for timing: with `interleave`, the unfinished cases of each shape on each
// device together, in sweep order (the groups ordered by their first case); otherwise one case
// a group.
std::vector<std::vector<Case>> timing_groups(const std::vector<Case>& cases, bool interleave);

}  // namespace attnbench
