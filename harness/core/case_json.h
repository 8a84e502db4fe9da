// A case as JSON, the form `attnbench plan --json` prints and `attnbench append` reads: the shape,
// dtype, layout and the work it counts, so tools outside C++ never expand configs or count work.
#pragma once

#include <nlohmann/json.hpp>

#include "harness/core/case.h"

namespace attnbench {

// {"index", "id", "variant", the shape's fields, "causal", "mask", "doc_lens", "alibi", "softcap",
//  "dtype", "layout", "element_bytes", "pairs", "flops", "flop_convention", "dense_flops",
//  "density", "bytes", "description"}.
nlohmann::ordered_json case_json(const Case& c);

// The shape named by the fields case_json writes (the derived ones are ignored; "mask", "alibi" and
// "softcap" may be left out, so measurements written before them still read). Throws
// std::runtime_error naming a missing or malformed field.
Shape shape_from_json(const nlohmann::json& object);

}  // namespace attnbench
