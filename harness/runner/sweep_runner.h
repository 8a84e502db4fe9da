// Runs a sweep's cases: skip what cannot run (unsupported, over the memory cap, over the time
// budget) with the reason; check each case against the oracle before timing; time it; re-check
// after timing; append its record. One case at a time, each record flushed as it finishes.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/core/record.h"
#include "harness/measure/executor.h"
#include "harness/plan/config.h"
#include "harness/plan/sweep.h"
#include "harness/results/manifest.h"
#include "harness/results/run_folder.h"

namespace attnbench {

struct SweepOutcome {
  int64_t ok = 0, skipped = 0, failed = 0, already_done = 0;
  int64_t failed_earlier = 0;  // of already_done: failed records a resumed run keeps as they are
  bool device_lost = false;    // the sweep stopped early; finished cases are kept
};

class SweepRunner {
 public:
  SweepRunner(const SweepConfig& config, const MeasuredPeaks& peaks);

  // Times every case not already in `folder`, appending a record per case.
  SweepOutcome run(const std::vector<Case>& cases, RunFolder& folder);

  // Oracle only, on every input distribution, no timing and no results folder. With `records`,
  // the records are collected there and no per-case table is printed (progress still is, on
  // stderr when interactive).
  SweepOutcome check(const std::vector<Case>& cases, std::vector<CaseRecord>* records = nullptr);

 private:
  // The last finished case of a variant: the n^2 model scales its time to predict the next.
  struct Observed {
    double flops = 0;
    double seconds_per_run = 0;
  };

  CaseRecord run_case(const Case& c, bool timed);
  // run_case, with a lost device turned into a failed record; counts the status in `outcome`.
  CaseRecord run_and_count(const Case& c, bool timed, SweepOutcome& outcome);
  std::string skip_reason(const Case& c, const Variant& variant, bool timed) const;
  Executor& executor_for(Device device);

  const SweepConfig& config_;
  MeasuredPeaks peaks_;
  std::map<std::string, Observed> last_ok_;
  std::map<Device, std::unique_ptr<Executor>> executors_;
};

}  // namespace attnbench
