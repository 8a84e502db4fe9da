// Seeded random inputs from the distributions that break attention kernels in different ways.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/case.h"
#include "harness/core/distribution.h"
#include "harness/core/host_tensors.h"

namespace attnbench {

// Q, K and V of `shape` drawn from `distribution`, then rounded to shape.dtype once: the values
// the variant receives and the oracle reads.
HostTensors make_inputs(const Shape& shape, Distribution distribution, uint64_t seed);

// The seed of case `case_index`'s inputs in a sweep seeded with `config_seed` (measure.seed):
// different per case, fixed by the config, so a rerun times the same inputs.
uint64_t input_seed(int64_t config_seed, int64_t case_index);

// The seed case `c` of a sweep draws its inputs from: input_seed of its own index, or with
// measure.interleave of its shape's (Case::shape_index), since a group times every variant on one
// set of inputs, which must not depend on which of its cases a run, a shard, --cases or a resume
// selects. A shape's index is its first variant's case index, so a sweep whose first variant is
// in every group draws what it drew before.
uint64_t case_input_seed(int64_t config_seed, bool interleave, const Case& c);

}  // namespace attnbench
