// Seeded random inputs from the distributions that break attention kernels in different ways.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/distribution.h"
#include "harness/core/host_tensors.h"

namespace attnbench {

// Q, K and V of `shape` drawn from `distribution`, then rounded to shape.dtype once: the values
// the variant receives and the oracle reads.
HostTensors make_inputs(const Shape& shape, Distribution distribution, uint64_t seed);

}  // namespace attnbench
