// The oracle's tolerances, by precision, in one place.
#pragma once

#include "harness/variant.h"

namespace attnbench {

struct Tolerance {
  double rel_l2;   // ||o - r|| / ||r|| over the checked rows
  double max_abs;  // largest |o - r|, relative to max(1, max |r|)
};

// fp32 arithmetic lands well below 1e-5 relative L2 on well-conditioned inputs; tf32 rounds the
// GEMM inputs to 10 mantissa bits, which lands at 1-3e-3 (host emulation of the edge shapes);
// bf16/fp16 inputs round further.
inline Tolerance tolerance_for(Precision precision) {
  switch (precision) {
    case Precision::fp32: return {1e-5, 1e-4};
    case Precision::tf32: return {5e-3, 5e-2};
    case Precision::fp16: return {5e-3, 5e-2};
    case Precision::bf16: return {1e-2, 1e-1};
  }
  return {0, 0};
}

// Softmax turns an absolute error d in a score into a relative error d in its weight, and fp32
// rounding alone puts an error of about eps * |s| into a score s. So with scores of magnitude
// ~100 (the large_scores inputs) even an exact-as-fp32-allows kernel lands near 1e-5. The
// tolerance therefore grows in proportion to the largest |score| past this many units; on
// ordinary inputs (|s| < 16) it is the base tolerance.
inline constexpr double well_conditioned_max_score = 16.0;

inline double score_conditioning_factor(double max_abs_score) {
  return max_abs_score > well_conditioned_max_score ? max_abs_score / well_conditioned_max_score
                                                    : 1.0;
}

// Each weights row must sum to 1 within this (in float64, after the variant's fp32 rounding).
inline double weights_row_sum_tolerance(Precision precision) {
  return precision == Precision::fp32 ? 1e-4 : 1e-2;
}

}  // namespace attnbench
