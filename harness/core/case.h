// One case of a sweep: a variant on a shape, at its position in the full sweep.
#pragma once

#include <cstdint>
#include <string>

#include "harness/core/shape.h"

namespace attnbench {

struct Case {
  int64_t index = 0;  // position in the full, unsharded sweep
  // Position of its shape among the sweep's shapes, the same for every variant: an interleaved
  // group's inputs are drawn from it (case_input_seed), whichever of its cases a run selects.
  int64_t shape_index = 0;
  std::string variant;
  Shape shape;
  std::string id;  // stable key: variant and shape
};

// "naive|b1|h8|kv8|q128|k128|dk64|dv64|causal|bf16|bshd": the key resume and merge match on. Masks
// other than none ("full") and causal, and the modifiers, are appended when set:
// "naive|b1|h8|kv8|q128|k128|dk64|dv64|full|fp32|bhsd|window:819|alibi|softcap:30".
std::string case_id(const std::string& variant, const Shape& shape);

}  // namespace attnbench
