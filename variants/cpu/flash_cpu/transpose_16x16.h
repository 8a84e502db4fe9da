// A 16 x 16 transpose of 32-bit elements in AVX-512 registers, for the tile path's packing
// (pairs of bf16 are one 32-bit element) and its output (fp32): 64 shuffles for 256 elements,
// where element-by-element copies take a load and a store each.
#pragma once

#if !defined(__AVX512F__) && !defined(ATTNBENCH_AVX512_EMULATED)
#error "transpose_16x16.h needs -mavx512f (or avx512_emulation.h first)"
#endif

#include <immintrin.h>

namespace attnbench::flash_cpu {

// rows[r] lane c becomes rows[c] lane r. Four steps, each pairing registers 2^k apart: 32-bit
// elements, then 64-bit, then 128-bit lanes, then 256-bit halves. (A template over the path only,
// so that each path's object keeps its own copy, built with its instructions.)
template <class Ops>
inline void transpose_16x16(__m512i rows[16]) {
  __m512i t[16];
  for (int r = 0; r < 16; r += 2) {
    t[r] = _mm512_unpacklo_epi32(rows[r], rows[r + 1]);
    t[r + 1] = _mm512_unpackhi_epi32(rows[r], rows[r + 1]);
  }
  for (int r = 0; r < 16; r += 4) {
    rows[r] = _mm512_unpacklo_epi64(t[r], t[r + 2]);
    rows[r + 1] = _mm512_unpackhi_epi64(t[r], t[r + 2]);
    rows[r + 2] = _mm512_unpacklo_epi64(t[r + 1], t[r + 3]);
    rows[r + 3] = _mm512_unpackhi_epi64(t[r + 1], t[r + 3]);
  }
  // 128-bit lanes: [a0 b0 a2 b2] and [a1 b1 a3 b3] of registers 4 apart.
  for (int r = 0; r < 16; r += 8)
    for (int k = 0; k < 4; ++k) {
      t[r + k] = _mm512_shuffle_i32x4(rows[r + k], rows[r + k + 4], 0x88);
      t[r + k + 4] = _mm512_shuffle_i32x4(rows[r + k], rows[r + k + 4], 0xDD);
    }
  for (int k = 0; k < 8; ++k) {
    rows[k] = _mm512_shuffle_i32x4(t[k], t[k + 8], 0x88);
    rows[k + 8] = _mm512_shuffle_i32x4(t[k], t[k + 8], 0xDD);
  }
}

}  // namespace attnbench::flash_cpu
