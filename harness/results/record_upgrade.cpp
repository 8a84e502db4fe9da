#include "harness/results/record_upgrade.h"

#include <algorithm>
#include <exception>
#include <string>

#include "harness/core/case_json.h"
#include "harness/core/shape_fields.h"

namespace attnbench {

namespace {

using Json = nlohmann::ordered_json;

void default_to(Json& record, const char* key, const Json& value) {
  if (!record.contains(key)) record[key] = value;
}

// A field older records hold empty or not at all.
bool missing_or_empty(const Json& record, const char* key) {
  return !record.contains(key) || record[key].is_null() ||
         (record[key].is_string() && record[key].get<std::string>().empty());
}

// A shape field a record was written without (an axis added since): the value shape_from_json
// reads for it when absent, the axis's default. A record whose shape does not read is left as it
// is, for the record check to name what is wrong.
void fill_new_shape_fields(Json& record) {
  const auto& fields = shape_fields();
  const bool complete = std::all_of(fields.begin(), fields.end(), [&](const ShapeField& field) {
    return record.contains(field.name);
  });
  if (complete) return;
  Shape shape;
  try {
    shape = shape_from_json(record);
  } catch (const std::exception&) {
    return;
  }
  for (const ShapeField& field : fields)
    if (!record.contains(field.name)) record[field.name] = field.value(shape);
}

}  // namespace

Json upgrade_record(const Json& stored) {
  Json record = stored;
  if (!record.is_object()) return record;
  default_to(record, "dtype", "fp32");
  default_to(record, "layout", "bhsd");
  default_to(record, "pass", "fwd");
  default_to(record, "saved_for_backward_bytes", nullptr);
  default_to(record, "kv_cache", "contiguous");
  default_to(record, "kv_lens", nullptr);
  default_to(record, "bytes_moved", nullptr);
  default_to(record, "arithmetic_intensity", nullptr);
  default_to(record, "kv_quant_rel_l2_err", nullptr);
  if (!record.contains("runs_per_sample")) {
    const bool timed = record.contains("time_ms_median") && !record["time_ms_median"].is_null();
    record["runs_per_sample"] = timed ? Json(1) : Json(nullptr);
  }
  if (missing_or_empty(record, "mask"))
    record["mask"] = record.contains("causal") && record["causal"] == true ? "causal" : "none";
  if (missing_or_empty(record, "kv_dtype")) record["kv_dtype"] = record["dtype"];
  fill_new_shape_fields(record);
  if (record.contains("isa") && !record.contains("code_path")) {
    record["code_path"] = record["isa"];
    record.erase("isa");
  }
  return record;
}

}  // namespace attnbench
