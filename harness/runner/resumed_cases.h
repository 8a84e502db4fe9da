// A sweep resumed in a folder that already holds some of its records: the cases still to run,
// what the folder counts as done, and the times the case budget predicts from.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "harness/core/case.h"
#include "harness/results/run_folder.h"
#include "harness/runner/case_budget.h"

namespace attnbench {

struct ResumedCases {
  std::vector<Case> to_run;  // in sweep order
  int64_t already_done = 0;
  int64_t failed_earlier = 0;  // of already_done: failed records kept as they are
  // By variant: its last ok record in the folder, so a resumed run's time budget predicts from
  // the cases it already has.
  std::map<std::string, ObservedCase> last_finished;
};

ResumedCases resume_in(const RunFolder& folder, const std::vector<Case>& cases);

}  // namespace attnbench
