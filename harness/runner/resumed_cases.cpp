#include "harness/runner/resumed_cases.h"

#include <set>

namespace attnbench {

ResumedCases resume_in(const RunFolder& folder, const std::vector<Case>& cases) {
  ResumedCases resumed;
  const std::set<std::string> finished = folder.finished_case_ids();
  std::set<std::string> failed_before;
  // The records were checked against the record schema when the folder was read.
  for (const auto& record : folder.records()) {
    if (record.at("status") == "failed")
      failed_before.insert(record.at("case_id").get<std::string>());
    if (record.at("status") == "ok") {
      resumed.last_finished[record.at("variant").get<std::string>()] = {
          record.at("flops").get<double>(), record.at("time_ms_median").get<double>() / 1e3};
    }
  }
  for (const Case& c : cases) {
    if (finished.count(c.id) != 0) {
      ++resumed.already_done;
      resumed.failed_earlier += static_cast<int64_t>(failed_before.count(c.id));
    } else {
      resumed.to_run.push_back(c);
    }
  }
  return resumed;
}

}  // namespace attnbench
