// One case's result, as stored in cases.jsonl and summary.csv. The field list is the results
// format the plot scripts read: extend it, never rename a field.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/oracle.h"
#include "harness/sweep.h"
#include "harness/timing.h"
#include "harness/variant.h"
#include "harness/work_count.h"

namespace attnbench {

enum class CaseStatus { ok, skipped, failed };
const char* to_string(CaseStatus status);

struct CaseRecord {
  Case the_case;
  Device device = Device::cpu;
  Precision precision = Precision::fp32;
  CaseStatus status = CaseStatus::ok;
  std::string reason;
  std::optional<TimingStats> timing;
  std::optional<OracleReport> oracle;        // the check before timing
  std::optional<OracleReport> oracle_after;  // the re-check after timing
  WorkCount work;
  std::optional<std::size_t> workspace_bytes;  // measured peak
  double peak_gflops = 0;  // the machine's measured peak for this device, 0 if unknown
  int threads = 0;
  std::string distribution;
};

// The columns of summary.csv, in order; every record has exactly these keys.
const std::vector<std::string>& record_fields();

nlohmann::ordered_json to_json(const CaseRecord& record);

}  // namespace attnbench
