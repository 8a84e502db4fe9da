// Inputs whose O accumulator passes float's range: V in [2^124, 2^125] (2.1e37 to 4.3e37, exact in
// fp32 and bf16), all of one sign, and Q a quarter of its draw, so that the scores stay near 0 and
// the weights near 1: a row that sees 16 or more keys sums p V past 2^128 before it divides by
// the sum of the p, for certain, while O (a convex combination of V's rows) is below 2^125. What
// the tests of the online-softmax variants' second pass (flash_cpu, chunked) run on.
#pragma once

#include <cmath>
#include <vector>

#include "harness/core/element_types.h"
#include "harness/core/host_tensors.h"

namespace attnbench::testing {

// `inputs` (drawn as make_inputs draws them, in inputs.shape.dtype) made so.
inline void make_output_accumulator_overflow(HostTensors& inputs) {
  for (float& value : inputs.q) value = std::ldexp(value, -2);
  // 1 + |x| / (1 + |x|) in [1, 2], rounded to the dtype, then times 2^124 (exact).
  for (float& value : inputs.v)
    value = std::ldexp(
        round_to(inputs.shape.dtype, 1.0f + std::abs(value) / (1.0f + std::abs(value))), 124);
}

}  // namespace attnbench::testing
