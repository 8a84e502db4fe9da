// The oracle's tolerances, by precision, in one place.
#pragma once

#include <cmath>
#include <cstdint>

#include "harness/core/dtype.h"

namespace attnbench {

struct Tolerance {
  double rel_l2;   // ||o - r|| / max(||r||, ||terms of r||) over the checked rows (oracle.cpp)
  double max_abs;  // largest |o - r|, relative to max(1, max |r|) (and, for dQ, the element's
                   // own terms where larger: backward_oracle.cpp)
};

// How the tolerance follows from the dtype's unit roundoff u (dtype.h). The oracle reads the
// inputs already rounded to the dtype, so only the variant's own rounding is judged:
//  - O is stored in the dtype: each element carries a relative error of at most u (root mean
//    square about u / sqrt(3));
//  - a kernel may round the softmax weights P to the dtype before P.V (FlashAttention does, and
//    so does flash_cpu in bf16): o = sum_j p_j v_j picks up sum_j p_j d_j v_j with |d_j| <= u,
//    at most u in relative terms even when every d_j has the same sign (near-constant rows);
//  - fp32 accumulation adds a few fp32 roundoffs, negligible beside a 16-bit u.
// Together at most about 2u relative L2, so the bound is 3u. The largest absolute error is
// u |o| + u max|v|; inputs reach |v| ~ 5, so 8u relative to max(1, max|r|).
// bf16 (u = 2^-8): 1.17e-2 and 3.1e-2; fp16 (u = 2^-11): 1.46e-3 and 3.9e-3.
// fp32 has no such rounding step: its floor, 1e-5, covers fp32 accumulation over rows of up to
// 65536 keys, and grows past them (row_length_factor, below).
// tf32 is different in kind: the variant rounds the fp32 inputs to 10 mantissa bits itself, and
// input rounding is amplified by the scores (host emulation of the edge shapes lands at 1-3e-3).
// A quantized KV cache (kv_quant.h) keeps the case's dtype's tolerance: the oracle reads the
// dequantized values code * scale, the fp32 numbers a kernel gets when it widens a code and
// multiplies by its scale, so the quantization error is not the kernel's (it is recorded on its
// own, kv_quant_rel_l2_err). What is left is the kernel's arithmetic: that one multiply (or the
// scale applied once to a dot product or a weight, a different order of the same fp32 products)
// adds an fp32 roundoff per element, inside the fp32 accumulation term above; O is still rounded
// to the dtype, and P may be.
inline constexpr double narrow_rel_l2_factor = 3;
inline constexpr double narrow_max_abs_factor = 8;

inline Tolerance tolerance_for(DType dtype, Precision precision = Precision::fp32) {
  if (precision == Precision::tf32 && dtype == DType::fp32) return {5e-3, 5e-2};
  if (dtype == DType::fp32) return {1e-5, 1e-4};
  const double u = unit_roundoff(dtype);
  return {narrow_rel_l2_factor * u, narrow_max_abs_factor * u};
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

// The fp32 floor holds for rows of up to this many keys. A row sums a weight per key twice (the
// softmax's normaliser, and P V), and fp32 rounds each addition: rounding errors that fall either
// way add up as sqrt(keys) u (u = 2^-24) relative, 1.5e-5 at 65536 keys. Past it the floor
// grows as sqrt(keys / 65536): at 1M keys of normal inputs naive, blocked, openmp, chunked and
// flash_cpu land at 1.6-3.3e-5 (blas 1.5e-6; 2 cores of a Zen 5, `attnbench check`, seq_q 2), over
// 1e-5 with right arithmetic. Near-constant rows sum nearly equal terms, whose roundings fall the
// same way and add up linearly: past ~256K keys (sequential sums, naive and blocked, past ~64K)
// fp32 loses more than that, and the oracle says so.
inline constexpr double fp32_floor_max_keys = 65536;

inline double row_length_factor(int64_t keys) {
  return keys > fp32_floor_max_keys ? std::sqrt(static_cast<double>(keys) / fp32_floor_max_keys)
                                    : 1.0;
}

// The tolerance a check applies. Scores are computed in fp32 whatever the dtype (bf16 and fp16
// products are exact in fp32), so only the fp32 part grows with the largest score: fp32 (and tf32)
// as a whole; for bf16/fp16 the dtype's rounding budget stays fixed and the fp32 floor grows
// beside it. The fp32 part's relative L2 grows too with the rows' length, `keys` (seq_kv).
inline Tolerance conditioned_tolerance(DType dtype, Precision precision, double max_abs_score,
                                       int64_t keys = 0) {
  const double conditioning = score_conditioning_factor(max_abs_score);
  const double length = row_length_factor(keys);
  const Tolerance base = tolerance_for(dtype, precision);
  if (dtype == DType::fp32)
    return {base.rel_l2 * conditioning * length, base.max_abs * conditioning};
  const Tolerance fp32 = tolerance_for(DType::fp32, Precision::fp32);
  return {base.rel_l2 + fp32.rel_l2 * conditioning * length,
          base.max_abs + fp32.max_abs * conditioning};
}

// Each weights row must sum to 1 within this (in float64, after the variant's fp32 rounding).
inline double weights_row_sum_tolerance(DType dtype, Precision precision) {
  return dtype == DType::fp32 && precision == Precision::fp32 ? 1e-4 : 1e-2;
}

}  // namespace attnbench
