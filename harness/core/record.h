// One case's result, as stored in cases.jsonl and summary.csv, and the record schema: the one
// table of fields that the JSON writer, the CSV columns and `attnbench schema --json` all read.
// Extend it, never rename a field: the plot scripts read these names.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/case.h"
#include "harness/core/dtype.h"
#include "harness/core/oracle_report.h"
#include "harness/core/timing_stats.h"
#include "harness/core/work_count.h"

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
  double peak_gflops = 0;  // the machine's measured peak for this device and dtype, 0 if unknown
  std::string peak_name;   // which manifest peak that is
  int threads = 0;
  std::string distribution;
  std::string isa;  // the code path a CPU variant chose (e.g. "avx512_bf16"); empty if none
  // Why the run's peak checks make this record doubtful (they disagree, or one of them saw other
  // work running); empty when they do not. disturbed_reason() gives every reason it is flagged.
  std::string peak_checks_reason;
};

// GFLOP/s at the median time; 0 for an untimed record.
double record_gflops(const CaseRecord& record);

// Why this record's numbers were disturbed by other work on the machine: the peak checks
// disagree, or it ran above 100% of the measured peak (the peak read low); empty when neither.
std::string disturbed_reason(const CaseRecord& record);

struct RecordField {
  const char* name;
  const char* type;  // JSON type; "|null" when absent for some records
  const char* description;
  nlohmann::ordered_json (*value)(const CaseRecord& record);
  bool in_csv = true;  // arrays stay in cases.jsonl: a CSV cell holds one value
};

// Every field of a record, in column order.
const std::vector<RecordField>& record_schema();

// The names of record_schema(), in order: the fields of a record in cases.jsonl.
const std::vector<std::string>& record_fields();

// The fields that are columns of summary.csv, in order.
const std::vector<std::string>& csv_fields();

nlohmann::ordered_json to_json(const CaseRecord& record);

// record_schema() as JSON: [{"name", "type", "description"}, ...].
nlohmann::ordered_json schema_json();

}  // namespace attnbench
