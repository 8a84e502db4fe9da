// The two warp-wide tensor-core instructions of flash_tc, emulated on the host from the PTX ISA's
// description alone: ldmatrix (which lane gives which row address, which elements each lane
// receives) and mma.sync m16n8k16 (fragments gathered into whole matrices by the coordinate
// functions of mma_fragments.h, multiplied, scattered back). The tests feed them the addresses the
// kernel computes, so a wrong address or a wrong fragment map gives a wrong product.
#pragma once

#include <array>
#include <set>
#include <vector>

#include "harness/cuda/mma_fragments.h"

namespace attnbench::testing {

// A warp's registers: [lane][register][16-bit element] (values held as floats: every bf16 and
// fp16 value is exactly an fp32 one) and its fp32 accumulators [lane][register].
using HalfRegisters = std::array<std::array<std::array<float, 2>, 4>, 32>;
using Accumulators = std::array<std::array<float, 4>, 32>;

// ldmatrix.x4 over `tile` (16-bit elements as floats): lane L gives the element offset
// `row_offsets[L]` of row L % 8 of matrix L / 8 (16 contiguous bytes).
inline HalfRegisters ldmatrix_x4(const std::vector<float>& tile,
                                 const std::array<int, 32>& row_offsets, bool trans) {
  HalfRegisters out{};
  for (int lane = 0; lane < 32; ++lane)
    for (int m = 0; m < 4; ++m)
      for (int e = 0; e < 2; ++e) {
        const mma::Coord at = mma::ldmatrix_element(lane, e, trans);
        out[lane][m][e] = tile.at(static_cast<std::size_t>(row_offsets[8 * m + at.row] + at.col));
      }
  return out;
}

// Whether each of ldmatrix's four phases (the eight row addresses of one matrix) reads eight
// different groups of four banks: then every phase is one shared-memory wavefront.
inline bool ldmatrix_conflict_free(const std::array<int, 32>& row_offsets) {
  for (int m = 0; m < 4; ++m) {
    std::set<int> groups;
    for (int i = 0; i < 8; ++i) groups.insert(mma::bank_group(row_offsets[8 * m + i]));
    if (groups.size() != 8) return false;
  }
  return true;
}

// d += a b for one m16n8k16: `a` is the A fragment (registers 0-3), `b` two registers of B given
// as [lane][register][element]. Products of 16-bit values are exact in fp32 and summed in fp32.
inline void mma_m16n8k16(Accumulators& d, const HalfRegisters& a,
                         const std::array<std::array<std::array<float, 2>, 2>, 32>& b) {
  float a_matrix[16][16] = {}, b_matrix[16][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    for (int e = 0; e < 8; ++e) {
      const mma::Coord at = mma::a_coord(lane, e);
      a_matrix[at.row][at.col] = a[lane][e / 2][e % 2];
    }
    for (int e = 0; e < 4; ++e) {
      const mma::Coord at = mma::b_coord(lane, e);
      b_matrix[at.row][at.col] = b[lane][e / 2][e % 2];
    }
  }
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 4; ++r) {
      const mma::Coord at = mma::c_coord(lane, r);
      float sum = d[lane][r];
      for (int k = 0; k < 16; ++k) sum += a_matrix[at.row][k] * b_matrix[k][at.col];
      d[lane][r] = sum;
    }
}

// Registers `first` and `first + 1` of an ldmatrix.x4 result: one B fragment.
inline std::array<std::array<std::array<float, 2>, 2>, 32> b_fragment(const HalfRegisters& r,
                                                                      int first) {
  std::array<std::array<std::array<float, 2>, 2>, 32> b{};
  for (int lane = 0; lane < 32; ++lane) {
    b[lane][0] = r[lane][first];
    b[lane][1] = r[lane][first + 1];
  }
  return b;
}

}  // namespace attnbench::testing
