// flash_cpu's two fp32 micro-kernels, written once against a SIMD path (harness/simd/*.h): the
// score tile S = Q Kᵀ and the output tile O = alpha O + P V. Both keep a rows x vectors tile of
// accumulators in registers and feed it with one broadcast and `vectors` loads per step, 12 FMAs
// per 2 loads on AVX-512 (12 x 2 accumulators, 27 of 32 zmm) and AVX2 (6 x 2, 15 of 16 ymm).
// Cost: (d_k + d_v) FMAs per score, at 76-81% of the FMA peak inside the loop.
#pragma once

#include <cstdint>

#include "variants/cpu/flash_cpu/forward_blocks.h"
#include "variants/cpu/flash_cpu/tile_dispatch.h"

namespace attnbench::flash_cpu {

// The register tiles of a SIMD path, from its width and register count: a strip of at least 16
// queries (so strips tile the 96-query block), and as many key rows as leave room for the loaded
// vectors and the broadcast, rounded down to a divisor of the 48-key block.
template <class Simd>
struct TileShape {
  static constexpr int kVectors = Simd::kWidth >= 8 ? 2 : 4;
  static constexpr int kRows = [] {
    int rows = (Simd::kRegisters - kVectors - 1) / kVectors;
    while (kKeyBlock % rows != 0) --rows;
    return rows;
  }();
  static constexpr int64_t kStrip = kVectors * Simd::kWidth;  // queries per S kernel column
  static_assert(kQueryBlock % kStrip == 0, "query block must be whole strips");
};

// A register tile of accumulators set to zero, unrolled so each stays in its register.
template <class V, int kRows, int kVectors>
__attribute__((always_inline)) inline void zero_tile(V (&acc)[kRows][kVectors], V zero) {
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x) acc[r][x] = zero;
}

// scores[r][i] = sum_c k[r][c] * q_t[c][i] for kRows keys and one strip of queries: the keys are
// broadcast, kVectors query vectors loaded, kRows x kVectors accumulators stay in registers.
// The strip's running block max is updated from the registers, saving the softmax a pass.
template <class Ops, int kRows>
void score_tile(const float* k, int64_t d_k, const float* q_t, float* scores, float* block_max) {
  using V = typename Ops::V;
  constexpr int kWidth = Ops::kWidth;
  constexpr int kVectors = TileShape<Ops>::kVectors;
  V acc[kRows][kVectors];
  zero_tile(acc, Ops::zero());
#pragma GCC unroll 2  // the counter, compare and branch then share 2 x 24 FMAs, not 24
  for (int64_t c = 0; c < d_k; ++c) {
    V q[kVectors];
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x) q[x] = Ops::load(q_t + c * kQueryBlock + x * kWidth);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const V key = Ops::broadcast(k[r * d_k + c]);
#pragma GCC unroll 4
      for (int x = 0; x < kVectors; ++x) acc[r][x] = Ops::fmadd(key, q[x], acc[r][x]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x) Ops::store(scores + r * kQueryBlock + x * kWidth, acc[r][x]);
#pragma GCC unroll 4
  for (int x = 0; x < kVectors; ++x) {
    V tile_max = Ops::load(block_max + x * kWidth);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) tile_max = Ops::max(tile_max, acc[r][x]);
    Ops::store(block_max + x * kWidth, tile_max);
  }
}

// score_tile for a run-time row count (1 .. the tile's).
template <class Ops>
void score_rows(int rows, const float* k, int64_t d_k, const float* q_t, float* scores,
                float* block_max) {
  dispatch_count<TileShape<Ops>::kRows>(rows, [&](auto row_count) {
    score_tile<Ops, decltype(row_count)::value>(k, d_k, q_t, scores, block_max);
  });
}

// out[i][c] = alpha[i] * out[i][c] + sum_j p[j][i] * v[j][c] for kRows queries and kVectors
// vectors of d_v: the probabilities are broadcast, V rows loaded, the O tile stays in registers.
// The accumulators start at zero and alpha O is added once at the end: started from alpha O,
// every FMA chain would wait for the O tile's loads (from L2 at d = 128, where O is 48 KiB)
// before its first step; at the end those loads were issued long before they are needed.
// Each key step also prefetches one cache line from `prefetch` on (see forward_query_block.h).
template <class Ops, int kRows, int kVectors>
void output_tile(const float* p, int64_t keys, const float* v, int64_t v_stride, const float* alpha,
                 float* out, int64_t out_stride, const float* prefetch) {
  using V = typename Ops::V;
  constexpr int kWidth = Ops::kWidth;
  V acc[kRows][kVectors];
  zero_tile(acc, Ops::zero());
#pragma GCC unroll 2  // as in score_tile
  for (int64_t j = 0; j < keys; ++j) {
    __builtin_prefetch(prefetch + j * kCacheLine);
    V value[kVectors];
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x) value[x] = Ops::load(v + j * v_stride + x * kWidth);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const V weight = Ops::broadcast(p[j * kQueryBlock + r]);
#pragma GCC unroll 4
      for (int x = 0; x < kVectors; ++x) acc[r][x] = Ops::fmadd(weight, value[x], acc[r][x]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) {
    const V a = Ops::broadcast(alpha[r]);
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x) {
      float* o = out + r * out_stride + x * kWidth;
      Ops::store(o, Ops::fmadd(a, Ops::load(o), acc[r][x]));
    }
  }
}

// output_tile for run-time row and vector counts (1 .. the tile's).
template <class Ops>
void output_rows(int rows, int vectors, const float* p, int64_t keys, const float* v,
                 int64_t v_stride, const float* alpha, float* out, int64_t out_stride,
                 const float* prefetch) {
  dispatch_tile<TileShape<Ops>::kRows, TileShape<Ops>::kVectors>(
      rows, vectors, [&](auto row_count, auto vector_count) {
        output_tile<Ops, decltype(row_count)::value, decltype(vector_count)::value>(
            p, keys, v, v_stride, alpha, out, out_stride, prefetch);
      });
}

}  // namespace attnbench::flash_cpu
