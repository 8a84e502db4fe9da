// One untimed run of a prepared variant on given inputs, checked by the oracle: the step the
// sweep does before and after timing, the tests do for every edge shape, and `check` does alone.
#pragma once

#include <cmath>

#include "harness/measure/executor.h"
#include "harness/measure/oracle.h"
#include "harness/variant/variant.h"

namespace attnbench {

inline float default_scale(const Shape& shape) {
  return 1.0f / std::sqrt(static_cast<float>(shape.d_k));
}

// Loads `inputs` into `executor`, poisons the outputs with NaN, runs `variant` (already prepared
// for inputs.shape) and compares with the float64 reference. A variant that throws (a
// TensorAccessError for a wrongly typed or placed view among them) fails with its name and
// message; a DeviceLostError is rethrown.
OracleReport run_checked(Variant& variant, Executor& executor, const HostTensors& inputs,
                         float scale, bool with_weights, const OracleOptions& options);

}  // namespace attnbench
