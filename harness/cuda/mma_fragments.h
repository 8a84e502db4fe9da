// The index arithmetic of the tensor-core kernel (flash_tc), apart from any device code so the
// tests check it on a machine without a GPU: where the elements of an mma.sync.m16n8k16 fragment
// live (lane, register) as the PTX ISA defines them, what ldmatrix hands each lane, which tile
// rows each lane points ldmatrix at, the swizzle of the shared-memory tiles, and the mask per
// accumulator element (the tiles a block visits are mask_math.h's, the tile sizes
// variants/cuda/flash_tc_traits.h). The kernel calls these very
// functions, and the host emulation test (tests/cuda/flash_tc_emulation_test.cpp) runs the kernel's
// tile algorithm through them.
//
// Notation of the PTX ISA ("Matrix Fragments for mma.m16n8k16 with floating point type"): in a
// warp, lane = 4 * groupID + threadID_in_group; a 32-bit register holds two 16-bit elements, the
// lower-numbered one in the low half.
#pragma once

#include <cstdint>

#include "harness/cuda/launch_math.h"
#include "harness/cuda/mask_math.h"

namespace attnbench::mma {

struct Coord {
  int row;
  int col;
};

// --- mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32 --------------------------

// C and D, 16 x 8 fp32, four registers a lane: c0 c1 in row groupID, c2 c3 in row groupID + 8,
// columns 2 * threadID_in_group and the one after.
ATTNBENCH_HOST_DEVICE constexpr Coord c_coord(int lane, int reg) {
  return {lane / 4 + 8 * (reg / 2), 2 * (lane % 4) + reg % 2};
}

// A, 16 x 16 row-major, eight 16-bit elements a0..a7 in four registers: a0 a1 (row g, columns
// 2t, 2t+1), a2 a3 (row g+8), a4 a5 (row g, columns 2t+8, 2t+9), a6 a7 (row g+8, columns 2t+8..).
ATTNBENCH_HOST_DEVICE constexpr Coord a_coord(int lane, int element) {
  return {lane / 4 + 8 * ((element / 2) % 2), 2 * (lane % 4) + element % 2 + 8 * (element / 4)};
}

// B, 16 x 8 (k x n) column-major, four 16-bit elements b0..b3 in two registers: b0 b1 (rows 2t,
// 2t+1), b2 b3 (rows 2t+8, 2t+9), all in column g. As a Coord: row = k, col = n.
ATTNBENCH_HOST_DEVICE constexpr Coord b_coord(int lane, int element) {
  return {2 * (lane % 4) + element % 2 + 8 * (element / 2), lane / 4};
}

// The FlashAttention-2 trick that keeps P in registers: the accumulators of S for keys
// [16 kk, 16 kk + 16) (two 8-key blocks, 2 kk and 2 kk + 1) sit exactly where the A fragment of
// P for that k-chunk needs them. A register r (elements 2r, 2r+1) takes the C registers
// (c_register_of_a(r), + 1) of S block 2 kk + c_block_of_a(r).
ATTNBENCH_HOST_DEVICE constexpr int c_block_of_a(int a_register) { return a_register / 2; }
ATTNBENCH_HOST_DEVICE constexpr int c_register_of_a(int a_register) { return 2 * (a_register % 2); }

// --- ldmatrix.sync.aligned.m8n8.x4{.trans}.shared.b16 -----------------------------------------

// Four 8 x 8 matrices of 16-bit elements; lane 8 m + i gives the address of row i of matrix m
// (16 contiguous bytes). Lane L receives, in its register m, two elements of matrix m: without
// .trans, (row L / 4, columns 2 (L % 4) and + 1); with .trans, (rows 2 (L % 4) and + 1,
// column L / 4). `element` is 0 or 1.
ATTNBENCH_HOST_DEVICE constexpr Coord ldmatrix_element(int lane, int element, bool trans) {
  return trans ? Coord{2 * (lane % 4) + element, lane / 4}
               : Coord{lane / 4, 2 * (lane % 4) + element};
}

// Which row and column (a multiple of 8) of a 16 x 16 block lane `lane` points ldmatrix.x4 at, in
// the two orders the kernel uses:
//  - row_major_x4: matrix m covers rows 8 (m % 2).., columns 8 (m / 2)..; without .trans it
//    yields an A fragment (Q), and with .trans on a row-major [keys][d] V block it yields the B
//    fragments of two 8-column blocks (registers 0, 1: d 0-7; 2, 3: d 8-15).
//  - column_major_x4: matrix m covers rows 8 (m / 2).., columns 8 (m % 2)..; without .trans on a
//    row-major [keys][d] K block it yields the B fragments of Kᵀ for two 8-key blocks
//    (registers 0, 1: keys 0-7; 2, 3: keys 8-15).
ATTNBENCH_HOST_DEVICE constexpr Coord row_major_x4_address(int lane) {
  return {8 * ((lane / 8) % 2) + lane % 8, 8 * (lane / 16)};
}
ATTNBENCH_HOST_DEVICE constexpr Coord column_major_x4_address(int lane) {
  return {8 * (lane / 16) + lane % 8, 8 * ((lane / 8) % 2)};
}

// --- shared-memory tiles ----------------------------------------------------------------------

// A tile is [rows][D] 16-bit elements, D = 64 or 128 (rows of 128 or 256 bytes). The 16-byte
// chunk c of row r is stored at chunk c ^ (r % 8): the eight rows one ldmatrix phase reads at the
// same logical chunk then fall in eight different groups of four banks, where without the
// swizzle every row would start in bank 0 (an 8-way conflict). The element offset of (row, col):
template <int D>
ATTNBENCH_HOST_DEVICE constexpr int tile_offset(int row, int col) {
  static_assert(D == 64 || D == 128, "rows of 8 or 16 chunks");
  return row * D + (((col / 8) ^ (row % 8)) * 8) + col % 8;
}

// The byte offset of (row, col + 16 k) from that of (row, col), col < 16 (a lane's ldmatrix
// address, k steps of 16 columns on): the same row's swizzle, and the chunk bits 2 k disjoint from
// col / 8, so one XOR with an immediate; with a tile base aligned to a row (256 bytes) it may be
// applied to the whole shared-memory address. A lane then holds one base register per tile.
ATTNBENCH_HOST_DEVICE constexpr unsigned column_step_address(unsigned address, int k) {
  return address ^ static_cast<unsigned>(32 * k);
}

// The bank group (four 4-byte banks, 16 bytes) an element offset of a 16-bit tile falls in.
ATTNBENCH_HOST_DEVICE constexpr int bank_group(int element_offset) {
  return (element_offset * 2 / 16) % 8;
}

// --- the mask per accumulator element -------------------------------------------------------

// Whether accumulator `reg` of `lane` in S block `n_block` (keys kv0 + 8 n_block ..) is a score the
// row may see. keys_low and keys_high: the keys of the lane's two rows, g and g + 8
// (mask_math::row_keys, which also clips the tail tile at seq_kv).
// 32-bit: the kernel takes sequence lengths that fit an int, and 64-bit compares on 32 scores a
// tile cost registers.
ATTNBENCH_HOST_DEVICE inline bool score_visible(int kv0, int n_block, int lane, int reg,
                                                mask_math::KeySpan keys_low,
                                                mask_math::KeySpan keys_high) {
  const int key = kv0 + 8 * n_block + c_coord(lane, reg).col;
  return mask_math::sees(reg < 2 ? keys_low : keys_high, key);
}

}  // namespace attnbench::mma
