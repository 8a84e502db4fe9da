// What a line of cases.jsonl must hold for attnbench to read it back (resume, merge, summary).
// Records are written by attnbench, but the file is text a user can edit or damage; a damaged
// line must be a one-line error naming the file and line, never a JSON library exception.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace attnbench {

// Empty when `record` has the keys and types attnbench relies on; otherwise the first problem,
// e.g. "missing 'variant'" or "'flops' is not a number".
std::string record_schema_problem(const nlohmann::ordered_json& record);

}  // namespace attnbench
