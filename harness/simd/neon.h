// The NEON (AArch64 Advanced SIMD) path: 4 floats per float32x4_t, 32 vector registers. NEON is
// part of the AArch64 base architecture, so no compile option is needed; the operations are
// scalar.h's.
#pragma once

#if !defined(__aarch64__)
#error "harness/simd/neon.h is for aarch64"
#endif

#include <arm_neon.h>

#include <cstdint>
#include <limits>

#include "harness/core/element_types.h"
#include "harness/simd/exp2.h"

namespace attnbench::simd {

#define ATTNBENCH_SIMD_OP __attribute__((always_inline)) static inline

struct Neon {
  using V = float32x4_t;
  static constexpr int kWidth = 4;
  static constexpr int kRegisters = 32;
  ATTNBENCH_SIMD_OP V zero() { return vdupq_n_f32(0.0f); }
  ATTNBENCH_SIMD_OP V broadcast(float x) { return vdupq_n_f32(x); }
  ATTNBENCH_SIMD_OP V load(const float* p) { return vld1q_f32(p); }
  ATTNBENCH_SIMD_OP void store(float* p, V x) { vst1q_f32(p, x); }
  ATTNBENCH_SIMD_OP V fmadd(V a, V b, V c) { return vfmaq_f32(c, a, b); }
  ATTNBENCH_SIMD_OP V mul(V a, V b) { return vmulq_f32(a, b); }
  ATTNBENCH_SIMD_OP V add(V a, V b) { return vaddq_f32(a, b); }
  ATTNBENCH_SIMD_OP V sub(V a, V b) { return vsubq_f32(a, b); }
  ATTNBENCH_SIMD_OP V max(V a, V b) { return vmaxq_f32(a, b); }
  ATTNBENCH_SIMD_OP V min(V a, V b) { return vminq_f32(a, b); }
  ATTNBENCH_SIMD_OP V div(V a, V b) { return vdivq_f32(a, b); }
  ATTNBENCH_SIMD_OP V select_less(V x, V bound, V when_less, V otherwise) {
    return vbslq_f32(vcltq_f32(x, bound), when_less, otherwise);
  }
  ATTNBENCH_SIMD_OP V abs(V x) { return vabsq_f32(x); }
  ATTNBENCH_SIMD_OP V zero_if_minus_infinity(V x) {
    const uint32x4_t is_minus_infinity =
        vceqq_f32(x, vdupq_n_f32(-std::numeric_limits<float>::infinity()));
    return vbslq_f32(is_minus_infinity, vdupq_n_f32(0.0f), x);
  }
  // 2^n from exp2.h's biased rounding: its low mantissa bits shifted into the exponent field.
  ATTNBENCH_SIMD_OP V pow2_of_biased(V biased) {
    return vreinterpretq_f32_u32(vshlq_n_u32(vreinterpretq_u32_f32(biased), 23));
  }
  ATTNBENCH_SIMD_OP V exp2(V t) { return exp2_polynomial<Neon>(t); }
  ATTNBENCH_SIMD_OP void widen_fp16(const uint16_t* source, float* destination, int64_t count) {
    int64_t i = 0;
    for (; i + 4 <= count; i += 4)
      vst1q_f32(destination + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(source + i))));
    for (; i < count; ++i) destination[i] = from_fp16_bits(source[i]);
  }
  // bf16 is the top half of an fp32: the 16 bits widened to 32 and shifted into place.
  ATTNBENCH_SIMD_OP V load_bf16(const uint16_t* p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
  }
  ATTNBENCH_SIMD_OP V load_fp16(const uint16_t* p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
  }
  ATTNBENCH_SIMD_OP float reduce_add(V x) { return vaddvq_f32(x); }
};

#undef ATTNBENCH_SIMD_OP

}  // namespace attnbench::simd
