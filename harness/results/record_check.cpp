#include "harness/results/record_check.h"

#include <fmt/format.h>

#include <cmath>

#include "harness/core/dtype.h"
#include "harness/core/named_values.h"
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
