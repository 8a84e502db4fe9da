#include "harness/results/record_check.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>
#include <unordered_map>
#include <utility>

#include "harness/core/dtype.h"
#include "harness/core/named_values.h"
#include "harness/core/pass.h"
#include "harness/core/record.h"

namespace attnbench {

namespace {

enum class Kind { string, integer, number };

bool has_kind(const nlohmann::ordered_json& value, Kind kind) {
  switch (kind) {
    case Kind::string: return value.is_string();
    case Kind::integer: return value.is_number_integer();
    case Kind::number: return value.is_number();
  }
  return false;
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::string: return "a string";
    case Kind::integer: return "an integer";
    case Kind::number: return "a number";
  }
  return "?";
}

std::string require(const nlohmann::ordered_json& record, const char* key, Kind kind) {
  const auto found = record.find(key);
  if (found == record.end()) return fmt::format("missing '{}'", key);
  if (!has_kind(*found, kind)) return fmt::format("'{}' is not {}", key, kind_name(kind));
  return {};
}

// A value of a schema type (without "|null"): "integer" 0 to int64's max, "number" finite.
bool has_schema_type(const nlohmann::ordered_json& value, const std::string& type) {
  if (type == "integer") {
    // Read back as int64 everywhere: an unsigned value past its max is refused too.
    if (value.is_number_unsigned())
      return value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    return value.is_number_integer() && value.get<int64_t>() >= 0;
  }
  if (type == "number") return value.is_number() && std::isfinite(value.get<double>());
  if (type == "boolean") return value.is_boolean();
  if (type == "string") return value.is_string();
  if (type == "array") return value.is_array();
  return true;
}

std::string type_text(const std::string& type) {
  if (type == "integer")
    return "an integer from 0 to " + std::to_string(std::numeric_limits<int64_t>::max());
  if (type == "number") return "a finite number";
  if (type == "boolean") return "true or false";
  if (type == "array") return "an array";
  return "a string";
}

// What the arrays hold.
const char* element_type(const std::string& field) {
  if (field == "round_times_ms") return "number";
  return "integer";  // doc_lens, kv_lens
}

// Fields written outside the schema: a merged run's shard and machine, older records' isa.
constexpr const char* extra_string_fields[] = {"shard", "machine", "isa"};

// A schema type: "integer|null" is {"integer", nullable}.
struct FieldType {
  std::string type;
  bool nullable;

  explicit FieldType(const std::string& schema_type)
      : type(schema_type.substr(0, schema_type.find('|'))),
        nullable(schema_type.find('|') != std::string::npos) {}
};

std::string field_type_problem(const std::string& name, const FieldType& field,
                               const nlohmann::ordered_json& value) {
  const std::string& type = field.type;
  if (value.is_null()) {
    if (field.nullable) return {};
    return fmt::format("'{}' is null; the schema says {}", name, type);
  }
  const auto shown = [&value] {
    const std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return text.size() <= 40 ? text : text.substr(0, 37) + "...";
  };
  if (!has_schema_type(value, type))
    return fmt::format("'{}' must be {}, got {}", name, type_text(type), shown());
  if (type == "array") {
    const std::string element = element_type(name);
    for (std::size_t i = 0; i < value.size(); ++i)
      if (!has_schema_type(value[i], element))
        return fmt::format("'{}' element {} must be {}, got {}", name, i, type_text(element),
                           shown());
  }
  return {};
}

// Each schema field's type, and the extra fields', by name: looked up once per field a record
// holds (a folder of 100,000 records is read in seconds).
const std::unordered_map<std::string, FieldType>& field_types() {
  static const std::unordered_map<std::string, FieldType> types = [] {
    std::unordered_map<std::string, FieldType> by_name;
    for (const RecordField& field : record_schema())
      by_name.emplace(field.name, FieldType(field.type));
    for (const char* name : extra_string_fields) by_name.emplace(name, FieldType("string"));
    return by_name;
  }();
  return types;
}

std::string field_types_problem(const nlohmann::ordered_json& record) {
  const auto& types = field_types();
  for (const auto& [name, value] : record.items()) {
    const auto type = types.find(name);
    if (type == types.end()) continue;  // outside the schema: left as it is
    if (std::string problem = field_type_problem(name, type->second, value); !problem.empty())
      return problem;
  }
  return {};
}

// The shape's sizes: a case of size 0 was never run.
constexpr const char* size_fields[] = {"batch",  "heads", "kv_heads", "seq_q",
                                       "seq_kv", "d_k",   "d_v"};

// Quantities that are never below 0 (work, rates, sizes, ratios, errors, the soft-cap): a negative
// one passed as any finite number did, and the plots' log axes could not place it.
constexpr const char* non_negative_fields[] = {"softcap",
                                               "flops",
                                               "dense_flops",
                                               "density",
                                               "gflops",
                                               "gbps",
                                               "bytes",
                                               "bytes_moved",
                                               "arithmetic_intensity",
                                               "cv",
                                               "rel_ci_half_width",
                                               "target_rel_ci",
                                               "peak_gflops",
                                               "percent_of_peak",
                                               "peak_gbps",
                                               "ridge_intensity",
                                               "percent_of_bandwidth",
                                               "oracle_max_abs_err",
                                               "oracle_rel_l2_err",
                                               "oracle_rel_l2_tolerance",
                                               "oracle_after_rel_l2_err",
                                               "kv_quant_rel_l2_err"};

// Times are durations: above 0 (a peer's record may hold no rounds, an empty list). A negative
// minimum or round time read as a measurement and moved the ratios derived from it.
std::string time_problem(const nlohmann::ordered_json& record) {
  for (const char* name : {"time_ms_min", "time_ms_max"}) {  // the median: below, by status
    const auto found = record.find(name);
    if (found != record.end() && found->is_number() && !(found->get<double>() > 0))
      return fmt::format("'{}' is {}: a time is above 0", name, found->get<double>());
  }
  if (const auto rounds = record.find("round_times_ms");
      rounds != record.end() && rounds->is_array()) {
    for (std::size_t i = 0; i < rounds->size(); ++i) {
      const double ms = (*rounds)[i].get<double>();
      if (!(ms > 0))
        return fmt::format("'round_times_ms' element {} is {}: a time is above 0", i, ms);
    }
  }
  return {};
}

// A record's times as summarise writes them (timing.cpp): the fastest and slowest of the same
// samples as the median, and the median's interval from their order statistics, so
// min <= median <= max and ci_low <= median <= ci_high. Out of that order, a comparison of
// intervals drew a verdict from bounds that contradict the median.
std::string time_order_problem(const nlohmann::ordered_json& record) {
  const auto number = [&](const char* name) -> std::optional<double> {
    const auto found = record.find(name);
    if (found == record.end() || !found->is_number()) return std::nullopt;
    return found->get<double>();
  };
  const auto median = number("time_ms_median");
  for (const auto& [low_name, high_name] :
       {std::pair{"time_ms_min", "time_ms_max"}, std::pair{"ci_low_ms", "ci_high_ms"}}) {
    const auto low = number(low_name), high = number(high_name);
    if (low && high && *low > *high)
      return fmt::format("'{}' is {}, above '{}' {}", low_name, *low, high_name, *high);
    if (low && median && *low > *median)
      return fmt::format("'{}' is {}, above 'time_ms_median' {}", low_name, *low, *median);
    if (high && median && *high < *median)
      return fmt::format("'{}' is {}, below 'time_ms_median' {}", high_name, *high, *median);
  }
  return {};
}

std::string value_problem(const nlohmann::ordered_json& record) {
  if (std::string problem = time_problem(record); !problem.empty()) return problem;
  if (std::string problem = time_order_problem(record); !problem.empty()) return problem;
  for (const char* name : size_fields)
    if (const auto found = record.find(name); found != record.end() && *found == 0)
      return fmt::format("'{}' is 0; a shape's sizes are 1 or more", name);
  for (const char* name : non_negative_fields)
    if (const auto found = record.find(name);
        found != record.end() && found->is_number() && found->get<double>() < 0)
      return fmt::format("'{}' is {}, below 0", name, found->get<double>());
  if (const auto found = record.find("pass"); found != record.end()) {
    if (!parse_pass(found->get<std::string>()))
      return fmt::format("'pass' is '{}', not {}", found->get<std::string>(),
                         names_of(all_passes()));
  }
  return {};
}

}  // namespace

std::string record_schema_problem(const nlohmann::ordered_json& record) {
  if (!record.is_object()) return "a record must be a JSON object";
  for (const auto& [key, kind] :
       {std::pair{"case_index", Kind::integer}, std::pair{"case_id", Kind::string},
        std::pair{"variant", Kind::string}, std::pair{"status", Kind::string}}) {
    if (std::string problem = require(record, key, kind); !problem.empty()) return problem;
  }
  if (record.at("case_index").get<int64_t>() < 0 && !record.at("case_index").is_number_unsigned())
    return fmt::format("'case_index' is {}, below 0", record.at("case_index").get<int64_t>());
  if (const auto device = record.find("device"); device != record.end()) {
    if (!device->is_string() || !parse_device(device->get<std::string>()))
      return fmt::format("'device' is {}, not \"cpu\" or \"cuda\"", device->dump());
  }
  if (std::string problem = field_types_problem(record); !problem.empty()) return problem;
  if (std::string problem = value_problem(record); !problem.empty()) return problem;
  const std::string status = record.at("status").get<std::string>();
  if (!parse_case_status(status))
    return fmt::format("'status' is '{}', not {}", status, names_of(all_case_statuses()));
  if (status == "ok") {
    // The time budget of a resumed run predicts from these.
    for (const char* key : {"flops", "time_ms_median"}) {
      if (std::string problem = require(record, key, Kind::number); !problem.empty())
        return problem;
    }
    const double median = record.at("time_ms_median").get<double>();
    if (!(median > 0) || !std::isfinite(median))
      return fmt::format("'time_ms_median' is {}; an ok record's time is above 0", median);
    const double flops = record.at("flops").get<double>();
    if (!(flops >= 0) || !std::isfinite(flops)) return fmt::format("'flops' is {}, below 0", flops);
  }
  return {};
}

}  // namespace attnbench
