// The reporter that stores a sweep: each record appended to the folder's cases.jsonl as it
// finishes (a crash loses nothing finished), summary.csv written once, at the end.
#pragma once

#include "harness/results/run_folder.h"
#include "harness/runner/sweep_reporter.h"

namespace attnbench {

class FolderWriter final : public SweepReporter {
 public:
  explicit FolderWriter(RunFolder& folder) : folder_(folder) {}
  void run_started(const RunStarted&) override {}
  void case_finished(const CaseFinished& event) override { folder_.append(*event.stored); }
  void run_ended(const RunEnded&) override { folder_.write_summary_csv(); }

 private:
  RunFolder& folder_;
};

}  // namespace attnbench
