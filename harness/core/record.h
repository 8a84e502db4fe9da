// One case's result, as stored in cases.jsonl and summary.csv, and the record schema: the one
// table of fields that the JSON writer, the CSV columns and `attnbench schema --json` all read.
// Extend it, never rename a field: the plot scripts read these names. A record holds facts and is
// written once; the fields marked `derived` (the rating against the folder's peak checks) are
// never stored, every reader derives them (rate_record in harness/results/peak_checks.h).
#pragma once

#include <functional>
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
const std::vector<CaseStatus>& all_case_statuses();
std::optional<CaseStatus> parse_case_status(const std::string& name);

struct CaseRecord {
  Case sweep_case;
  Device device = Device::cpu;
  Precision precision = Precision::fp32;
  CaseStatus status = CaseStatus::ok;
  std::string reason;
  std::optional<TimingStats> timing;
  std::optional<OracleReport> oracle;        // the check before timing
  std::optional<OracleReport> oracle_after;  // the re-check after timing
  // A quantized KV cache's own error (kv_quant_error, oracle.h); unset when K and V are in the
  // case's dtype.
  std::optional<double> kv_quant_rel_l2_err;
  WorkCount work;
  std::optional<std::size_t> workspace_bytes;  // measured peak
  // The part of the workspace the forward keeps for the backward (Variant::
  // saved_for_backward_bytes); set for prepared cases whose pass needs the backward, else 0.
  std::optional<std::size_t> saved_for_backward_bytes;
  // A peak of the record's own, for records measured elsewhere (`attnbench append`) against a peak
  // the run's checks do not measure; 0 for a sweep's records, rated against peaks.jsonl.
  double peak_gflops = 0;
  std::string peak_name;  // which peak the record is rated against (a peaks.jsonl key)
  int threads = 0;
  std::string distribution;
  std::string code_path;  // the code path a CPU variant chose (e.g. "avx512_bf16"); empty if none
};

// GFLOP/s at the median time; 0 for an untimed record.
double record_gflops(const CaseRecord& record);

struct RecordField {
  const char* name;
  const char* type;  // JSON type; "|null" when absent for some records
  const char* description;
  // The stored value; null for a derived field.
  std::function<nlohmann::ordered_json(const CaseRecord& record)> value;
  bool in_csv = true;    // arrays stay in cases.jsonl: a CSV cell holds one value
  bool derived = false;  // not stored in cases.jsonl: every reader derives it (rate_record)
};

// The version of the record schema a folder's manifest names (schema_version), so a reader knows
// which fields its records hold and what they mean. Folders written before the version existed
// name none: they read as version 0, and upgrade_record (results/record_upgrade) brings their
// records to this one. Bump it when a field is renamed, removed or changes meaning, and teach
// upgrade_record the step; a reader refuses a folder of a version above its own.
constexpr int kSchemaVersion = 1;

// Every field of a record, in column order.
const std::vector<RecordField>& record_schema();

// The names of record_schema(), in order: the fields of a record as readers show it.
const std::vector<std::string>& record_fields();

// The fields that are columns of summary.csv, in order.
const std::vector<std::string>& csv_fields();

// The stored fields, in order: one line of cases.jsonl.
nlohmann::ordered_json to_json(const CaseRecord& record);

// record_schema() as JSON: {"schema_version": kSchemaVersion, "fields": [{"name", "type",
// "description", "in_csv", "derived"}, ...]}.
nlohmann::ordered_json schema_json();

}  // namespace attnbench
