// The AVX-512 SIMD path: 16 floats per __m512, 32 zmm registers. Only for translation units
// compiled with -mavx512f -mavx2 -mfma -mf16c (CMakeLists.txt: attnbench_isa_sources); the
// operations are scalar.h's. Only AVX512F instructions: every AVX-512 CPU has them.
#pragma once

#if (!defined(__AVX512F__) && !defined(ATTNBENCH_AVX512_EMULATED)) || !defined(__AVX2__) || \
    !defined(__FMA__) || !defined(__F16C__)
#error "harness/simd/avx512.h needs -mavx512f -mavx2 -mfma -mf16c (or avx512_emulation.h first)"
#endif

#include <immintrin.h>

#include <cstdint>
#include <limits>

#include "harness/simd/exp2.h"

namespace attnbench::simd {

#define ATTNBENCH_SIMD_OP __attribute__((always_inline)) static inline

struct Avx512 {
  using V = __m512;
  static constexpr int kWidth = 16;
  static constexpr int kRegisters = 32;
  // The zero-masked forms with an all-ones mask compile to the plain instructions; GCC 12's
  // unmasked ones start from an uninitialised register and trip -Wmaybe-uninitialized.
  static constexpr __mmask16 kAll = 0xFFFF;
  ATTNBENCH_SIMD_OP V zero() { return _mm512_setzero_ps(); }
  ATTNBENCH_SIMD_OP V broadcast(float x) { return _mm512_set1_ps(x); }
  ATTNBENCH_SIMD_OP V load(const float* p) { return _mm512_loadu_ps(p); }
  ATTNBENCH_SIMD_OP void store(float* p, V x) { _mm512_storeu_ps(p, x); }
  ATTNBENCH_SIMD_OP V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  ATTNBENCH_SIMD_OP V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  ATTNBENCH_SIMD_OP V add(V a, V b) { return _mm512_add_ps(a, b); }
  ATTNBENCH_SIMD_OP V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  ATTNBENCH_SIMD_OP V max(V a, V b) { return _mm512_maskz_max_ps(kAll, a, b); }
  ATTNBENCH_SIMD_OP V min(V a, V b) { return _mm512_maskz_min_ps(kAll, a, b); }
  ATTNBENCH_SIMD_OP V div(V a, V b) { return _mm512_maskz_div_ps(kAll, a, b); }
  ATTNBENCH_SIMD_OP V select_less(V x, V bound, V when_less, V otherwise) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, bound, _CMP_LT_OQ), otherwise, when_less);
  }
  ATTNBENCH_SIMD_OP V abs(V x) {
    return _mm512_castsi512_ps(
        _mm512_maskz_and_epi32(kAll, _mm512_castps_si512(x), _mm512_set1_epi32(0x7FFFFFFF)));
  }
  ATTNBENCH_SIMD_OP V zero_if_minus_infinity(V x) {
    const V minus_infinity = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, minus_infinity, _CMP_NEQ_UQ), x);
  }
  // 2^n from exp2.h's biased rounding: its low mantissa bits shifted into the exponent field.
  ATTNBENCH_SIMD_OP V pow2_of_biased(V biased) {
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAll, _mm512_castps_si512(biased), 23));
  }
  ATTNBENCH_SIMD_OP V exp2(V t) { return exp2_polynomial<Avx512>(t); }
  ATTNBENCH_SIMD_OP void widen_fp16(const uint16_t* source, float* destination, int64_t count) {
    int64_t i = 0;
    for (; i + 16 <= count; i += 16) {
      const __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(source + i));
      _mm512_storeu_ps(destination + i, _mm512_maskz_cvtph_ps(kAll, half));
    }
    for (; i < count; ++i) destination[i] = _cvtsh_ss(source[i]);
  }
  // bf16 is the top half of an fp32: the 16 bits widened to 32 and shifted into place.
  ATTNBENCH_SIMD_OP V load_bf16(const uint16_t* p) {
    const __m512i bits =
        _mm512_maskz_cvtepu16_epi32(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAll, bits, 16));
  }
  ATTNBENCH_SIMD_OP V load_fp16(const uint16_t* p) {
    return _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  // The two 256-bit halves added, then AVX2's reduction (the masked extract, as the other ops
  // here, keeps GCC from reading an undefined register).
  ATTNBENCH_SIMD_OP float reduce_add(V x) {
    const __m512d bits = _mm512_castps_pd(x);
    const __m256d lower = _mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xF, bits, 0);
    const __m256d upper = _mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xF, bits, 1);
    const __m256 halves = _mm256_add_ps(_mm256_castpd_ps(lower), _mm256_castpd_ps(upper));
    __m128 sum = _mm_add_ps(_mm256_castps256_ps128(halves), _mm256_extractf128_ps(halves, 1));
    sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
    sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
    return _mm_cvtss_f32(sum);
  }
};

#undef ATTNBENCH_SIMD_OP

}  // namespace attnbench::simd
