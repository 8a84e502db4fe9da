// What a line of cases.jsonl must hold for attnbench to read it back (resume, merge, summary).
// Records are written by attnbench, but the file is text a user can edit or damage; a damaged
// line must be a one-line error naming the file and line, never a JSON library exception.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace attnbench {

// Empty when `record` has the keys and types attnbench relies on; otherwise the first problem,
// e.g. "missing 'variant'" or "'flops' is not a number". Every field it holds is of its type in
// record_schema() (an integer from 0 to int64's max, a finite number, ...; null only where the
// schema allows it): a reader never meets a value of the wrong kind. A field a record lacks was
// written before the field existed; upgrade_record fills what it can.
std::string record_schema_problem(const nlohmann::ordered_json& record);

}  // namespace attnbench
