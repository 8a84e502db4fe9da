// The backward oracle: float64 reference gradients dQ, dK, dV of the forward oracle.h checks, and
// the comparison every variant's backward must pass. Cost: a full check is O(B * H * seq_q *
// seq_kv * d) in float64, a forward and a backward of every head; a sampled one (large n, rule in
// backward_oracle.cpp) does that for a few key heads only, plus O(seq_kv * d) per sampled dQ row.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "harness/core/dtype.h"
#include "harness/core/host_tensors.h"
#include "harness/core/oracle_options.h"
#include "harness/core/oracle_report.h"
#include "harness/core/tolerance.h"

namespace attnbench {

// dQ, dK, dV in bhsd order: fp32 as a variant wrote them, or float64 for the reference.
template <class T>
struct Gradients {
  std::vector<T> dq, dk, dv;
};

// The whole reference: every row of dQ and every key of dK and dV, for inputs.dout.
Gradients<double> reference_gradients(const HostTensors& inputs, double scale);

// The gradients' tolerance: the forward's (tolerance.h), times backward_tolerance_factor. Why:
// dV = P^T dO is a product like O = P V and carries the forward's error (P rounded to the dtype
// before it, as FlashAttention does); dQ = dS K and dK = dS^T Q go through dS = P o (dP - D),
// with P rounded and then dS rounded to the dtype before the products (FlashAttention does both):
// two rounding steps of u where the forward has one, so twice the forward's budget. D =
// rowsum(dO o O) reads O as stored in the dtype, and where the variant's O row is within the
// forward's max-abs tolerance of the reference, the variant's row, so O's own error (its
// rounding, and the forward's arithmetic) is not charged to the backward: under the cancellation
// in dP - D, an ulp of bf16 in O moved dQ by 3% of its norm at seq 2, d_v 8 on the bf16-product
// paths. A row further off, or not finite, is not taken (the forward's sampled check may not have
// read it): a backward that read it is charged through D.
// The relative error is taken against the larger of the gradient's norm and its terms', and
// dQ's max abs error, element by element, against the largest of 1, the gradient's largest
// element and that element's own terms (see GradientComparison in backward_oracle.cpp): a
// rounding per term moves a sum by u times its terms, which under cancellation (dQ with
// near-equal keys) are far larger than the sum.
// In fp32 the budget is set by another effect: on rows one key dominates, D ~ dP and dS = P o
// (dP - D) is the residue of a cancellation, whose error (u |dP|) is large against dS itself, so
// dQ and dK carry a relative error far above the products'. Measured on the edge shapes under
// dominant_key inputs: up to 1.7e-4 relative L2, alike for naive, blas and flash_cpu (so not one
// variant's arithmetic); fp32_gradient_rel_l2 = 1e-3 keeps a margin over that and stays far below
// the O(1) error of a wrong gradient.
inline constexpr double backward_tolerance_factor = 2;
inline constexpr double fp32_gradient_rel_l2 = 1e-3;

inline Tolerance gradient_tolerance(DType dtype, Precision precision, double max_abs_score) {
  const Tolerance forward = conditioned_tolerance(dtype, precision, max_abs_score);
  Tolerance gradient{backward_tolerance_factor * forward.rel_l2,
                     backward_tolerance_factor * forward.max_abs};
  if (dtype == DType::fp32 && precision == Precision::fp32)
    gradient.rel_l2 = std::max(gradient.rel_l2, fp32_gradient_rel_l2);
  return gradient;
}

// Compares a variant's gradients (fp32, bhsd order) with the reference on the rows and keys the
// sampling rule picks. `stored_o`: the O the variant's backward read (fp32 values of the dtype,
// bhsd), from whose rows near the reference's D is taken; empty: the reference's own O rounded to
// the dtype.
// The report's errors are those of the gradient worst against its tolerance; a failure names dQ,
// dK or dV and the element.
OracleReport check_gradients(const HostTensors& inputs, double scale, const Gradients<float>& got,
                             const std::vector<float>& stored_o, Precision precision,
                             const OracleOptions& options);

}  // namespace attnbench
