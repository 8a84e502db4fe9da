// The limits a case must fit before it is timed: the config's memory cap and its time budget.
// The sweep applies them to its variants and `attnbench prepare` to a peer's, so both skip the
// same cases with the same reasons.
#pragma once

#include <string>

#include "harness/core/shape.h"
#include "harness/plan/config.h"

namespace attnbench {

// Q, K, V and O at the dtype's size (and dO, with dQ, dK, dV in fp32, when the pass needs the
// backward).
double tensor_bytes(const Shape& s);

// Host memory the harness holds for a case beside the variant's workspace: the fp32 inputs the
// oracle reads, their packed copies, the output buffer and its fp32 copy.
double host_harness_bytes(const Shape& s);

// Why `workspace` bytes plus the harness's own do not fit measure.memory_cap_gb; empty when they
// do.
std::string over_memory_cap(const MeasureConfig& measure, const Shape& s, double workspace);

// The last finished case of a variant: the n^2 model scales its time to predict the next.
struct ObservedCase {
  double flops = 0;
  double seconds_per_run = 0;
};

// Why a case of `flops` is predicted, from `seen`, to take more than timing.case_budget_s
// (warm-up, the first runs and the timed ones); empty when it is not.
std::string over_time_budget(const TimingOptions& timing, const ObservedCase& seen, double flops);

}  // namespace attnbench
