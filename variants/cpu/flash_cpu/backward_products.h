// flash_cpu's backward products, written once against a SIMD path: out (+)= A B, with A read
// through two strides (so one kernel takes A or Aᵀ, key-major or query-major) and broadcast one
// element at a time, B read as rows of vectors. The five products of the backward are all of this
// form (backward_key_block.h): S = Q Kᵀ, dP = dO Vᵀ, dV += Pᵀ dO, dK += dSᵀ Q, dQ += dS K. The
// register tile (ProductTileShape) is kRows x kVectors accumulators fed by kRows broadcasts and
// kVectors loads per step. Cost: rows * columns * depth FMAs; B's rows are reread once per group
// of kRows output rows.
#pragma once

#include <algorithm>
#include <cstdint>

#include "variants/cpu/flash_cpu/micro_kernels.h"
#include "variants/cpu/flash_cpu/tile_dispatch.h"

namespace attnbench::flash_cpu {

// The products' register tile: 6 x 4 vectors on AVX-512 (24 accumulators, 4 loaded vectors and
// the broadcast: 29 of 32 zmm; 10 loads per 24 FMAs where the forward's 12 x 2 takes 14), the
// forward's tile elsewhere (micro_kernels.h: 6 x 2 on AVX2). On one core of an AVX-512 host with
// AMX, the operands of a 96-query, 96-key, d 128 block in cache, 6 x 4 ran the products at
// 186-203 GFLOP/s where 12 x 2 ran 170-186 (8 x 3 was close, but d 64's 4 vectors and 96 keys' 6
// split unevenly into 3s); the whole fp32 backward took 0.93-0.95 of 12 x 2's time at n 4096,
// d 64 and 0.97-1.0 at d 128 (results/backward-products-ab).
template <class Ops>
struct ProductTileShape {
  static constexpr bool kWide = Ops::kRegisters >= 32 && Ops::kWidth >= 16;
  static constexpr int kRows = kWide ? 6 : TileShape<Ops>::kRows;
  static constexpr int kVectors = kWide ? 4 : TileShape<Ops>::kVectors;
};

// Where A and B are: element (r, k) of A at a[r * row_step + k * depth_step], row k of B at
// b + k * b_stride (its columns contiguous).
struct ProductOperands {
  const float* a;
  int64_t row_step, depth_step;
  const float* b;
  int64_t b_stride;
};

// out[r][x] = (accumulate ? out[r][x] : 0) + sum_k A[r][k] B[k][x] for kRows rows and kVectors
// vectors of columns. As in output_tile, the accumulators start at zero and `out` is read last.
template <class Ops, int kRows, int kVectors>
void product_tile(const ProductOperands& m, int64_t depth, float* out, int64_t out_stride,
                  bool accumulate) {
  using V = typename Ops::V;
  constexpr int kWidth = Ops::kWidth;
  V acc[kRows][kVectors];
  zero_tile(acc, Ops::zero());
  const float* a = m.a;
  const float* b = m.b;
#pragma GCC unroll 2  // as in score_tile
  for (int64_t k = 0; k < depth; ++k) {
    V row[kVectors];
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x) row[x] = Ops::load(b + x * kWidth);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const V factor = Ops::broadcast(a[r * m.row_step]);
#pragma GCC unroll 4
      for (int x = 0; x < kVectors; ++x) acc[r][x] = Ops::fmadd(factor, row[x], acc[r][x]);
    }
    a += m.depth_step;
    b += m.b_stride;
  }
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x) {
      float* o = out + r * out_stride + x * kWidth;
      Ops::store(o, accumulate ? Ops::add(Ops::load(o), acc[r][x]) : acc[r][x]);
    }
}

// product_tile for run-time row and vector counts (1 .. the tile's).
template <class Ops>
void product_rows(int rows, int vectors, const ProductOperands& m, int64_t depth, float* out,
                  int64_t out_stride, bool accumulate) {
  dispatch_tile<ProductTileShape<Ops>::kRows, ProductTileShape<Ops>::kVectors>(
      rows, vectors, [&](auto row_count, auto vector_count) {
        product_tile<Ops, decltype(row_count)::value, decltype(vector_count)::value>(
            m, depth, out, out_stride, accumulate);
      });
}

// out[rows][columns] (+)= A B over `depth`; columns a multiple of Ops::kWidth. Row groups outside,
// column tiles inside: a group's A elements stay in L1 while B's rows stream past.
template <class Ops>
void product(int64_t rows, int64_t columns, int64_t depth, const ProductOperands& m, float* out,
             int64_t out_stride, bool accumulate) {
  constexpr int kRows = ProductTileShape<Ops>::kRows;
  constexpr int kVectors = ProductTileShape<Ops>::kVectors;
  const int64_t column_vectors = columns / Ops::kWidth;
  for (int64_t r = 0; r < rows; r += kRows) {
    const int group = static_cast<int>(std::min<int64_t>(kRows, rows - r));
    for (int64_t x = 0; x < column_vectors; x += kVectors) {
      const int vectors = static_cast<int>(std::min<int64_t>(kVectors, column_vectors - x));
      ProductOperands tile = m;
      tile.a = m.a + r * m.row_step;
      tile.b = m.b + x * Ops::kWidth;
      product_rows<Ops>(group, vectors, tile, depth, out + r * out_stride + x * Ops::kWidth,
                        out_stride, accumulate);
    }
  }
}

}  // namespace attnbench::flash_cpu
