// The AVX2 SIMD path: 8 floats per __m256, 16 ymm registers, FMA3, F16C for fp16. Only for
// translation units compiled with -mavx2 -mfma -mf16c (CMakeLists.txt: attnbench_isa_sources);
// the operations are scalar.h's.
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "harness/simd/avx2.h needs -mavx2 -mfma -mf16c"
#endif

#include <immintrin.h>

#include <cstdint>
#include <limits>

#include "harness/simd/exp2.h"

namespace attnbench::simd {

#define ATTNBENCH_SIMD_OP __attribute__((always_inline)) static inline

struct Avx2 {
  using V = __m256;
  static constexpr int kWidth = 8;
  static constexpr int kRegisters = 16;
  ATTNBENCH_SIMD_OP V zero() { return _mm256_setzero_ps(); }
  ATTNBENCH_SIMD_OP V broadcast(float x) { return _mm256_set1_ps(x); }
  ATTNBENCH_SIMD_OP V load(const float* p) { return _mm256_loadu_ps(p); }
  ATTNBENCH_SIMD_OP void store(float* p, V x) { _mm256_storeu_ps(p, x); }
  ATTNBENCH_SIMD_OP V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  ATTNBENCH_SIMD_OP V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  ATTNBENCH_SIMD_OP V add(V a, V b) { return _mm256_add_ps(a, b); }
  ATTNBENCH_SIMD_OP V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  ATTNBENCH_SIMD_OP V max(V a, V b) { return _mm256_max_ps(a, b); }
  ATTNBENCH_SIMD_OP V min(V a, V b) { return _mm256_min_ps(a, b); }
  ATTNBENCH_SIMD_OP V div(V a, V b) { return _mm256_div_ps(a, b); }
  ATTNBENCH_SIMD_OP V select_less(V x, V bound, V when_less, V otherwise) {
    return _mm256_blendv_ps(otherwise, when_less, _mm256_cmp_ps(x, bound, _CMP_LT_OQ));
  }
  ATTNBENCH_SIMD_OP V abs(V x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }
  ATTNBENCH_SIMD_OP V zero_if_minus_infinity(V x) {
    const V minus_infinity = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    return _mm256_andnot_ps(_mm256_cmp_ps(x, minus_infinity, _CMP_EQ_OQ), x);
  }
  // 2^n from exp2.h's biased rounding: its low mantissa bits shifted into the exponent field.
  ATTNBENCH_SIMD_OP V pow2_of_biased(V biased) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(biased), 23));
  }
  ATTNBENCH_SIMD_OP V exp2(V t) { return exp2_polynomial<Avx2>(t); }
  ATTNBENCH_SIMD_OP void widen_fp16(const uint16_t* source, float* destination, int64_t count) {
    int64_t i = 0;
    for (; i + 8 <= count; i += 8)
      _mm256_storeu_ps(
          destination + i,
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(source + i))));
    for (; i < count; ++i) destination[i] = _cvtsh_ss(source[i]);
  }
  // bf16 is the top half of an fp32: the 16 bits widened to 32 and shifted into place.
  ATTNBENCH_SIMD_OP V load_bf16(const uint16_t* p) {
    const __m256i bits =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(bits, 16));
  }
  ATTNBENCH_SIMD_OP V load_fp16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  ATTNBENCH_SIMD_OP float reduce_add(V x) {
    __m128 sum = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
    sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
    return _mm_cvtss_f32(sum);
  }
};

#undef ATTNBENCH_SIMD_OP

}  // namespace attnbench::simd
