// Records of measurements taken outside attnbench (the PyTorch peer's JSON lines, `attnbench
// append`): every field of a measurement checked (type, range, name), the shape read as `plan
// --json` prints it, and the record built by the same code as a sweep's, so no tool outside C++
// computes GFLOP/s, bytes or percent of peak. A measurement that names an output has it checked
// by the harness's own oracle on inputs drawn again from its seed.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "harness/core/record.h"
#include "harness/results/run_folder.h"

namespace attnbench {

// The problem with one measurement; the caller names its line.
class BadMeasurement : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Whether a variant name is one of this binary's own, whose records only `attnbench run` makes
// (or that carry an output for the oracle): the registry's answer, given by the caller.
using OwnVariant = std::function<bool(const std::string& variant)>;

// One measurement (a JSON object) as a record of `folder`; throws BadMeasurement naming the
// field at fault.
CaseRecord record_from_measurement(const nlohmann::json& m, const RunFolder& folder,
                                   const OwnVariant& own_variant);

// Every measurement line ((line number, text), as read from `source`) as a checked record, before
// any is written: against the schema, the folder's recorded cases and each other (a case id given
// twice). Throws std::invalid_argument "SOURCE line N: ..." for the first line at fault.
std::vector<nlohmann::ordered_json> records_from_lines(
    const std::vector<std::pair<int64_t, std::string>>& lines, const std::string& source,
    const RunFolder& folder, const OwnVariant& own_variant);

// A number that must be finite and at least zero; throws BadMeasurement naming `key`.
double non_negative_number(const nlohmann::json& value, const std::string& key);

// `text` with each control character written as \xNN: a message that echoes input stays one line.
std::string escaped_controls(const std::string& text);

}  // namespace attnbench
