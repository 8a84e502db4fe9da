// flash_tc: FlashAttention-2 on the tensor cores, for bf16 and fp16 tensors. A block of four
// warps owns 64 query rows of one head, each warp an m16 tile of 16 rows; Q stays in shared
// memory and its fragments are re-read with ldmatrix for each K tile (held in registers they
// pushed d 64 into spills). 64-key tiles of K and V stream through shared
// memory, two stages deep, with cp.async: tile t+1 is in flight while tile t is computed. Per
// tile a warp computes S = Q Kᵀ (16 x 64, fp32) with mma.sync m16n8k16 into registers, masks it
// only where the tile crosses a mask's edge or seq_kv, keeps an online softmax in fp32 (the
// row max over the four lanes of a row by shuffles), rounds P = exp2(S - max) to the dtype in the
// very registers that are the A fragments of P V (no trip through shared memory), and adds P V
// to its fp32 accumulators, V's fragments read with ldmatrix.trans. O is normalised once, staged
// through shared memory and written in the dtype with 16-byte stores. Every mask kind (none,
// causal, window, prefix, documents) is block-sparse, as FlexAttention's block mask: a block
// loads only the key tiles meeting its rows' key range (harness/cuda/mask_math.h), each warp
// skips the products and softmax of those its own 16 rows do not see, and only tiles its rows
// see in part pay for the per-element mask, in a loop of their own (FlashAttention-2's split,
// flash_tc_tile_order.h): the tiles every row of the block sees in full run after them through
// a body with no mask arithmetic; causal and prefix blocks run heaviest-first.
// The scale·log2(e) is folded into the exponent, exp2(S·scale - max) one FFMA and one MUFU.EX2
// (ex2.approx.ftz: a P under 2^-126 is 0, as FlashAttention-2 has it), the max taken over the
// unscaled scores. Soft-capping and ALiBi (in log2 units, before the mask, mask.h's order) need
// the scores scaled first: a second instantiation, so the unmodified kernel carries none of their
// arithmetic; it also takes a scale that is not positive, under which the fold would not hold.
// GQA: query head h reads kv head h / group; bhsd and bshd are the same code with different
// strides (harness/cuda/attention_params.h). d_k, d_v ∈ {64, 128}.
// Over fused (fp32 on the CUDA cores): half the bytes per element, and the products on the tensor
// cores (16x the fp32 FMA rate on Hopper), with the same O(n) memory and tile skipping.
// Time: 2 * seq_q * seq_kv * (d_k + d_v) flops per head (d padded to max(d_k, d_v)) on the tensor
// cores plus about 5 fp32 operations per score (scale, max, exp2, sum) on the CUDA cores; K and V
// are read once per 64 query rows (per visited tile, under a mask). Memory: O(n): Q, K, V and O
// only; the documents mask adds its start rows (4 bytes a document) to the workspace.
// Resources (nvcc 13.0, ptxas -v, bf16 and fp16 alike): d 64: 159 registers on sm_90 (154 on
// sm_80) under __launch_bounds__(128, 3), 40 KiB dynamic shared memory, three blocks (12 warps)
// per SM; d 128: 221 (219), 80 KiB, two blocks (8 warps) per SM. Scaled first (soft-capping or
// ALiBi, one loop): 148 and 198 (sm_90), 148 and 195 (sm_80). No spill stores or loads and
// no stack frame in any of the sixteen kernels. Before the masks (causal only): d 64 166 (sm_90)
// and 168 (sm_80), d 128 255 and 249; holding the lane's two row ranges through the tile loop
// instead of finding them again in each partial tile spilled 8 bytes at d 128 on sm_90. What
// removed the spills of the first version (248 bytes at d 64 under a 128-register cap, 264 at d
// 128): 32-bit shared-memory addresses and in-tile offsets, 32-bit mask arithmetic, Q re-read per
// tile, and three blocks per SM at d 64 instead of four. Unverified on a GPU so far: checked only
// by tests/cuda/flash_tc_emulation_test.cpp, which runs this tile algorithm on the host through the
// same fragment functions (harness/cuda/ mma_fragments.h), and by the fragment and bank tests in
// tests/cuda/mma_fragments_test.cpp.
#include <cuda_runtime.h>
#include <math.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "harness/cuda/async_copy.cuh"
#include "harness/cuda/attention_params.h"
#include "harness/cuda/cuda_check.h"
#include "harness/cuda/dispatch.h"
#include "harness/cuda/document_starts.h"
#include "harness/cuda/kernel_info.h"
#include "harness/cuda/launch_math.h"
#include "harness/cuda/mask_math.h"
#include "harness/cuda/mma.cuh"
#include "harness/cuda/mma_fragments.h"
#include "harness/variant/registry.h"
#include "variants/cuda/flash_tc_tile_order.h"
#include "variants/cuda/flash_tc_traits.h"

namespace attnbench {
namespace {

using flash_tc::kBlockKeys;
using flash_tc::kBlockRows;
using flash_tc::kThreads;
using flash_tc::kWarpRows;

// Copies rows [0, rows_valid) and columns [0, d) of a [rows][row_stride] tensor into a swizzled
// [kRows][D] tile, 16 bytes a copy; zeros elsewhere, so a tail tile or d < D needs no special
// case in the math (zero keys are masked, zero V rows meet P = 0, zero columns add nothing).
// Consecutive threads take consecutive chunks of a row: each quarter-warp writes one whole 128-byte
// row segment, eight distinct bank groups after the swizzle. A thread copies the same chunk of
// rows kRowsPerPass apart: one pointer to its first, each further source a multiple of the row
// stride on (no per-copy row and chunk arithmetic), each destination a constant offset on (the
// swizzle repeats every 8 rows).
template <int kRows, int D>
__device__ __forceinline__ void load_tile(unsigned tile, const uint16_t* source, int row_stride,
                                          int rows_valid, int d) {
  constexpr int kChunksPerRow = D / 8;
  constexpr int kRowsPerPass = kThreads / kChunksPerRow;
  static_assert(kRows % kRowsPerPass == 0 && kRowsPerPass % 8 == 0,
                "the tile splits evenly over the threads, every copy in the same swizzle phase");
  const int row0 = static_cast<int>(threadIdx.x) / kChunksPerRow;
  const int chunk = static_cast<int>(threadIdx.x) % kChunksPerRow;
  // 32-bit offsets within a tile (prepare() checks 64 rows fit).
  const uint16_t* first = source + (row0 * row_stride + chunk * 8);
  const unsigned first_tile = tile + 2 * mma::tile_offset<D>(row0, chunk * 8);
  const bool chunk_valid = chunk * 8 < d;
#pragma unroll
  for (int i = 0; i < kRows / kRowsPerPass; ++i) {
    const bool valid = chunk_valid && row0 + i * kRowsPerPass < rows_valid;
    // An invalid copy reads nothing; its address is still the tile's first, readable, element.
    const uint16_t* from = valid ? first + i * kRowsPerPass * row_stride : source;
    kernels::cp_async_16_bytes(first_tile + 2 * i * kRowsPerPass * D, from, valid);
  }
}

// 2^x by the MUFU.EX2 unit alone, denormal results flushed to zero: exp2f's range fix-up (a
// compare and two predicated multiplies) only serves results under 2^-126, where P's terms are
// too small to move a row's sum.
__device__ __forceinline__ float exp2_flush_denormals(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The block's first query row: under causal and prefix masks the blocks near the end visit the
// most tiles, so they are launched first.
__device__ __forceinline__ int block_first_row(const AttentionParams& p) {
  const int query_block =
      mask_math::reverse_block_order(p.mask.kind) ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  return query_block * kBlockRows;
}

// The warp's first query row, found again where it is needed rather than held through the tile
// loops: held, it spilled at d 64 (168 registers).
__device__ __forceinline__ int warp_first_row(const AttentionParams& p) {
  return block_first_row(p) + static_cast<int>(threadIdx.x) / 32 * kWarpRows;
}

// What a block's key-tile steps share: the tiles' shared-memory addresses, K and V of the block's
// kv head, this thread's place.
struct BlockContext {
  unsigned q_address, k_address, v_address;
  const uint16_t* k;
  const uint16_t* v;
  int warp, lane;
  float slope_log2;
};

// A warp's running state: O's fp32 accumulators and its lane's two rows' softmax max and sum.
template <int D>
struct WarpState {
  float o_acc[D / 8][4];
  float row_max[2];
  float row_sum[2];  // this lane's keys only, reduced over the row's lanes at the end
};

// Issues the copies of K[tile] and V[tile] into `stage`, one commit group each. The commits are
// unconditional (tile < 0: no copy) so the group count stays the same on the last tile.
template <int D>
__device__ __forceinline__ void load_key_tile(const AttentionParams& p, const BlockContext& c,
                                              int stage, int tile) {
  constexpr int kTileElements = kBlockKeys * D;
  const int kv0 = tile * kBlockKeys;
  if (tile >= 0) {
    load_tile<kBlockKeys, D>(c.k_address + stage * 2 * kTileElements,
                             c.k + static_cast<int64_t>(kv0) * p.k_row_stride, p.k_row_stride,
                             min(kBlockKeys, p.seq_kv - kv0), p.d_k);
  }
  kernels::cp_async_commit();
  if (tile >= 0) {
    load_tile<kBlockKeys, D>(c.v_address + stage * 2 * kTileElements,
                             c.v + static_cast<int64_t>(kv0) * p.v_row_stride, p.v_row_stride,
                             min(kBlockKeys, p.seq_kv - kv0), p.d_v);
  }
  kernels::cp_async_commit();
}

// S = Q Kᵀ for the warp's 16 rows: s[j] is the 16 x 8 accumulator of the tile's keys 8 j ...
template <class Mma, int D>
__device__ __forceinline__ void scores(float (&s)[kBlockKeys / 8][4], const BlockContext& c,
                                       unsigned k_tile) {
#pragma unroll
  for (int j = 0; j < kBlockKeys / 8; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r) s[j][r] = 0.0f;
  // One base address per lane and tile; each k step is an XOR with an immediate
  // (mma::column_step_address), each key block an immediate offset.
  const mma::Coord q_at = mma::row_major_x4_address(c.lane);
  const mma::Coord k_at = mma::column_major_x4_address(c.lane);
  const unsigned q_lane =
      c.q_address + 2 * mma::tile_offset<D>(c.warp * kWarpRows + q_at.row, q_at.col);
  const unsigned k_lane = k_tile + 2 * mma::tile_offset<D>(k_at.row, k_at.col);
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t q_fragment[4];
    kernels::ldmatrix_x4(q_fragment, mma::column_step_address(q_lane, kk));
#pragma unroll
    for (int pair = 0; pair < kBlockKeys / 16; ++pair) {
      uint32_t b[4];
      kernels::ldmatrix_x4(b, mma::column_step_address(k_lane, kk) + 2 * 16 * pair * D);
      Mma::mma(s[2 * pair], q_fragment, b[0], b[1]);
      Mma::mma(s[2 * pair + 1], q_fragment, b[2], b[3]);
    }
  }
}

// Scaled to log2 units (here, or in the exponent: online_softmax); soft-capping, then ALiBi, then
// the mask (mask.h's order). kMasked: keys outside a row's range or past seq_kv are -inf, in the
// tiles the warp sees in part; the keys of this lane's two rows (g and g + 8 of the warp's tile)
// are found again in each such tile rather than held through the loop: registers are short,
// partial tiles few. The unmasked loop has none of it.
template <int D, bool kScaledFirst, bool kMasked>
__device__ __forceinline__ void modify_and_mask(float (&s)[kBlockKeys / 8][4],
                                                const AttentionParams& p, const BlockContext& c,
                                                int kv0, bool partial) {
  const int warp_row0 = warp_first_row(p);
  mask_math::KeySpan keys_low{0, 0}, keys_high{0, 0};
  if (kMasked && partial) {
    keys_low = mask_math::row_keys(p.mask, warp_row0 + mma::c_coord(c.lane, 0).row);
    keys_high = mask_math::row_keys(p.mask, warp_row0 + mma::c_coord(c.lane, 2).row);
  }
#pragma unroll
  for (int j = 0; j < kBlockKeys / 8; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      if constexpr (kScaledFirst) {
        s[j][r] *= p.scale_log2;
        const mma::Coord at = mma::c_coord(c.lane, r);
        s[j][r] = mask_math::modify_score(s[j][r], p.modifiers, c.slope_log2,
                                          warp_row0 + at.row + (p.seq_kv - p.seq_q),
                                          kv0 + 8 * j + at.col);
      }
      if (kMasked && partial && !mma::score_visible(kv0, j, c.lane, r, keys_low, keys_high)) {
        s[j][r] = -INFINITY;
      }
    }
}

// Online softmax for the lane's two rows (h = 0: registers 0, 1; h = 1: registers 2, 3), S turned
// into P in place. A row's 64 scores are spread over the four lanes of a quad: reduce over lane
// bits 0 and 1. Unscaled scores: the max of the scaled ones is the scaled max (the scale is
// positive), and exp2(s·scale - max) is one FFMA.
template <int D, bool kScaledFirst>
__device__ __forceinline__ void online_softmax(float (&s)[kBlockKeys / 8][4], WarpState<D>& w,
                                               const AttentionParams& p) {
  const float exponent_scale = kScaledFirst ? 1.0f : p.scale_log2;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kBlockKeys / 8; ++j)
      tile_max = fmaxf(tile_max, fmaxf(s[j][2 * h], s[j][2 * h + 1]));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const launch::OnlineStep step = launch::online_step(w.row_max[h], tile_max * exponent_scale);
    w.row_max[h] = step.max;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kBlockKeys / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        s[j][2 * h + e] = exp2_flush_denormals(fmaf(s[j][2 * h + e], exponent_scale, -step.base));
        sum += s[j][2 * h + e];
      }
    w.row_sum[h] = w.row_sum[h] * step.alpha + sum;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      w.o_acc[n][2 * h] *= step.alpha;
      w.o_acc[n][2 * h + 1] *= step.alpha;
    }
  }
}

// O += P V, 16 keys at a time: P's A fragment is S's accumulators, rounded to the dtype.
template <class Mma, int D>
__device__ __forceinline__ void add_pv(WarpState<D>& w, const float (&s)[kBlockKeys / 8][4],
                                       const BlockContext& c, unsigned v_tile) {
  // One base address per lane (mma::column_step_address steps it 16 d columns on).
  const mma::Coord at = mma::row_major_x4_address(c.lane);
  const unsigned v_lane = v_tile + 2 * mma::tile_offset<D>(at.row, at.col);
#pragma unroll
  for (int kk = 0; kk < kBlockKeys / 16; ++kk) {
    uint32_t a[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float* pair = s[2 * kk + mma::c_block_of_a(r)];
      a[r] = Mma::pack(pair[mma::c_register_of_a(r)], pair[mma::c_register_of_a(r) + 1]);
    }
#pragma unroll
    for (int pair = 0; pair < D / 16; ++pair) {
      uint32_t b[4];
      kernels::ldmatrix_x4_trans(b, mma::column_step_address(v_lane, pair) + 2 * 16 * kk * D);
      Mma::mma(w.o_acc[2 * pair], a, b[0], b[1]);
      Mma::mma(w.o_acc[2 * pair + 1], a, b[2], b[3]);
    }
  }
}

// Step `step` of the block's tile loop, on `tile`, with `next` (or -1) prefetched into the other
// stage. kMasked: the masked loop's body, where a warp skips the tiles none of its rows sees and
// masks those it sees in part; the unmasked loop's tiles are seen in full by every warp
// (flash_tc_tile_order.h), so its body tests nothing.
template <class Mma, int D, bool kScaledFirst, bool kMasked>
__device__ __forceinline__ void key_tile(WarpState<D>& w, const AttentionParams& p,
                                         const BlockContext& c, int step, int tile, int next) {
  constexpr int kTileElements = kBlockKeys * D;
  const int stage = step & 1;
  // K[tile] (and Q) land; the barrier also means every warp is done with the previous tile, whose
  // stage the copies of `next` overwrite.
  kernels::cp_async_wait<1>();
  __syncthreads();
  load_key_tile<D>(p, c, stage ^ 1, next);

  // The warp's own tile classes are found again in each masked tile (they are few), not held
  // through the loops: held, they spilled at d 64.
  const TileVisibility visibility =
      kMasked ? mask_math::classify(
                    mask_math::block_tiles(
                        mask_math::block_keys(p.mask, warp_first_row(p), kWarpRows), kBlockKeys),
                    tile)
              : TileVisibility::fully_visible;
  // A warp none of whose rows sees a key of this tile skips its products and softmax (the
  // block's copies and barriers go on): the tile would add exactly nothing, P = 0 and alpha = 1.
  const bool computes = visibility != TileVisibility::fully_masked;
  float s[kBlockKeys / 8][4];
  if (computes) {
    scores<Mma, D>(s, c, c.k_address + stage * 2 * kTileElements);
    modify_and_mask<D, kScaledFirst, kMasked>(s, p, c, tile * kBlockKeys,
                                              visibility == TileVisibility::partial);
    online_softmax<D, kScaledFirst>(s, w, p);
  }
  // V[tile] lands (K[next] and V[next] may still be in flight).
  kernels::cp_async_wait<2>();
  __syncthreads();
  if (computes) add_pv<Mma, D>(w, s, c, c.v_address + stage * 2 * kTileElements);
}

// O = acc / sum in the dtype, staged in this warp's 16 rows of the Q tile (conflict-free: the
// eight rows of a store hit eight different swizzled chunks), then written 16 bytes a lane. O's
// pointer and the tile's are found here, not held through the tile loops (registers are short).
template <class Mma, int D>
__device__ __forceinline__ void store_o(const WarpState<D>& w, const AttentionParams& p,
                                        const BlockContext& c) {
  extern __shared__ __align__(1024) uint4 shared_memory[];
  uint16_t* o_tile = reinterpret_cast<uint16_t*>(shared_memory) + c.warp * kWarpRows * D;
  auto* o = static_cast<uint16_t*>(p.o) + static_cast<int>(blockIdx.z) * p.o_batch_stride +
            static_cast<int>(blockIdx.y) * p.o_head_stride;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float total = w.row_sum[h];
    total += __shfl_xor_sync(0xffffffffu, total, 1);
    total += __shfl_xor_sync(0xffffffffu, total, 2);
    const float inverse = total > 0.0f ? 1.0f / total : 0.0f;  // a row that sees no key: O = 0
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      const mma::Coord at = mma::c_coord(c.lane, 2 * h);
      *reinterpret_cast<uint32_t*>(o_tile + mma::tile_offset<D>(at.row, 8 * n + at.col)) =
          Mma::pack(w.o_acc[n][2 * h] * inverse, w.o_acc[n][2 * h + 1] * inverse);
    }
  }
  __syncwarp();
  const int warp_row0 = warp_first_row(p);
  constexpr int kChunksPerRow = D / 8;
#pragma unroll
  for (int i = c.lane; i < kWarpRows * kChunksPerRow; i += 32) {
    const int row = i / kChunksPerRow, chunk = i % kChunksPerRow;
    if (warp_row0 + row < p.seq_q && chunk * 8 < p.d_v) {
      *reinterpret_cast<uint4*>(o + static_cast<int64_t>(warp_row0 + row) * p.o_row_stride +
                                chunk * 8) =
          *reinterpret_cast<const uint4*>(o_tile + mma::tile_offset<D>(row, chunk * 8));
    }
  }
}

// kScaledFirst: the scores are scaled first (soft-capping or ALiBi is on, which read log2 units,
// or the scale is not positive: flash_tc::scores_scaled_first); the instantiation without has no
// trace of either modifier and folds the scale into the exponent's FFMA.
template <class Mma, int D, bool kScaledFirst>
__global__ void __launch_bounds__(kThreads, flash_tc::min_blocks_per_sm(D))
    flash_tc_kernel(const AttentionParams p) {
  // Aligned to a tile row (256 bytes at d 128) for column_step_address's XOR on addresses.
  extern __shared__ __align__(1024) uint4 shared_memory[];
  BlockContext c;
  // The tiles as 32-bit shared-memory addresses (bytes), for cp.async and ldmatrix: Q (and O at
  // the end) [kBlockRows][D], then K and V.
  c.q_address = static_cast<unsigned>(__cvta_generic_to_shared(shared_memory));
  c.k_address = c.q_address + 2 * kBlockRows * D;  // [2][kBlockKeys][D]
  c.v_address = c.k_address + 4 * kBlockKeys * D;  // [2][kBlockKeys][D]
  c.warp = static_cast<int>(threadIdx.x) / 32;
  c.lane = static_cast<int>(threadIdx.x) % 32;
  const int head = blockIdx.y, batch = blockIdx.z;
  const int kv_head = head / p.group;
  const int q0 = block_first_row(p);

  const auto* q =
      static_cast<const uint16_t*>(p.q) + batch * p.q_batch_stride + head * p.q_head_stride;
  c.k = static_cast<const uint16_t*>(p.k) + batch * p.k_batch_stride + kv_head * p.k_head_stride;
  c.v = static_cast<const uint16_t*>(p.v) + batch * p.v_batch_stride + kv_head * p.v_head_stride;

  // The block loads the key tiles holding any key its 64 rows see (mask_math.h), those some row
  // sees in part first; in those each warp skips the tiles its own 16 rows do not see at all and
  // masks element by element only those its rows see in part.
  const flash_tc::TileOrder order = flash_tc::tile_order(
      mask_math::block_tiles(mask_math::block_keys(p.mask, q0, kBlockRows), kBlockKeys));
  c.slope_log2 = kScaledFirst && p.modifiers.alibi
                     ? mask_math::alibi_slope_log2(head, static_cast<int>(gridDim.y))
                     : 0.0f;

  // Groups in flight, oldest first: {Q, K[first]}, {V[first]}.
  load_tile<kBlockRows, D>(c.q_address, q + static_cast<int64_t>(q0) * p.q_row_stride,
                           p.q_row_stride, min(kBlockRows, p.seq_q - q0), p.d_k);
  load_key_tile<D>(p, c, 0, order.steps() > 0 ? order.tile_at(0) : -1);

  WarpState<D> w;
  w.row_max[0] = w.row_max[1] = -INFINITY;
  w.row_sum[0] = w.row_sum[1] = 0.0f;
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int r = 0; r < 4; ++r) w.o_acc[n][r] = 0.0f;

  // The scaled-first kernel runs every tile through the masked body: a second copy of its larger
  // body (the modifiers' arithmetic per score) spilled, and the unmasked loop's target is the
  // unmodified kernel's.
  const int steps = order.steps(), masked_steps = kScaledFirst ? steps : order.masked_steps();
  for (int step = 0; step < masked_steps; ++step) {
    key_tile<Mma, D, kScaledFirst, true>(w, p, c, step, order.tile_at(step),
                                         step + 1 < steps ? order.tile_at(step + 1) : -1);
  }
  if constexpr (!kScaledFirst) {
    // The unmasked run, consecutive tiles.
    for (int step = masked_steps, tile = order.unmasked_begin; step < steps; ++step, ++tile) {
      key_tile<Mma, D, kScaledFirst, false>(w, p, c, step, tile, step + 1 < steps ? tile + 1 : -1);
    }
  }

  // Every copy has landed and every warp is past its last ldmatrix before Q's tile is reused.
  kernels::cp_async_wait<0>();
  __syncthreads();
  store_o<Mma, D>(w, p, c);
}

template <class Mma, int D, bool kScaledFirst>
void configure_kernel() {
  const int64_t bytes = flash_tc::shared_bytes(D);
  int device = 0, optin = 0, major = 0;
  ATTNBENCH_CUDA_CHECK(cudaGetDevice(&device));
  ATTNBENCH_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 8) {
    throw std::runtime_error(
        "flash_tc needs mma.sync and cp.async (sm_80 or newer); this GPU is sm_" +
        std::to_string(major) + "x");
  }
  ATTNBENCH_CUDA_CHECK(
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > optin) {
    throw std::runtime_error("flash_tc needs " + std::to_string(bytes) +
                             " bytes of shared memory per block for d " + std::to_string(D) +
                             "; this GPU allows " + std::to_string(optin));
  }
  ATTNBENCH_CUDA_CHECK(cudaFuncSetAttribute(flash_tc_kernel<Mma, D, kScaledFirst>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(bytes)));
  ATTNBENCH_CUDA_CHECK(cudaFuncSetAttribute(flash_tc_kernel<Mma, D, kScaledFirst>,
                                            cudaFuncAttributePreferredSharedMemoryCarveout,
                                            cudaSharedmemCarveoutMaxShared));
}

template <class Mma, int D, bool kScaledFirst>
void launch_kernel(const AttentionParams& params, const Shape& s, cudaStream_t stream) {
  const dim3 blocks(static_cast<unsigned>(launch::ceil_div(s.seq_q, kBlockRows)),
                    static_cast<unsigned>(s.heads), static_cast<unsigned>(s.batch));
  flash_tc_kernel<Mma, D, kScaledFirst>
      <<<blocks, kThreads, flash_tc::shared_bytes(D), stream>>>(params);
  ATTNBENCH_CUDA_CHECK_LAUNCH("flash_tc_kernel");
}

// Calls function(Mma{}, d, scaled_first), the last two std::integral_constant, for the shape's
// dtype, d (64 or 128: the tiles of the larger of d_k and d_v) and scaled_first.
template <class Function>
void with_kernel_type(const Shape& s, bool scaled_first, Function&& function) {
  const int d = std::max(s.d_k, s.d_v) > 64 ? 128 : 64;
  dispatch::with_dtype<DType::bf16, DType::fp16>(s.dtype, "flash_tc", [&](auto dtype) {
    using Mma = typename kernels::MmaOf<decltype(dtype)::value>::type;
    dispatch::with_head_dim<64, 128>(d, "flash_tc", [&](auto head_dim) {
      dispatch::with_flag(scaled_first,
                          [&](auto scales_first) { function(Mma{}, head_dim, scales_first); });
    });
  });
}

bool has_modifiers(const Shape& s) { return mask_math::any_modifier(mask_math::make_modifiers(s)); }

class FlashTcVariant final : public Variant {
 public:
  VariantInfo info() const override {
    VariantInfo info = cuda_kernel_info(
        "flash_tc",
        "flash-attention-2 on the tensor cores (mma.sync m16n8k16, bf16/fp16, fp32 softmax and "
        "accumulation, S and P in registers, cp.async double buffering, block-sparse masks); O(n) "
        "memory",
        true);
    info.capabilities.dtypes = {DType::bf16, DType::fp16};
    info.capabilities.head_dims = {64, 128};
    return info;
  }

  // The documents' start rows, on the device (nothing for the other masks).
  std::size_t workspace_bytes(const Shape& shape) const override {
    return mask_math::document_starts_bytes(shape.mask);
  }

  void prepare(const Shape& shape, Workspace& workspace) override {
    refuse_unsupported(info(), shape);
    constexpr int64_t int_max = std::numeric_limits<int>::max();
    if (shape.seq_q > int_max - kBlockRows || shape.seq_kv > int_max - kBlockKeys) {
      throw std::runtime_error("flash_tc: sequence lengths must fit in 32-bit ints");
    }
    // Offsets within a 64-row tile are 32-bit: a row stride is at most heads * d (bshd).
    if (std::max(shape.heads, shape.kv_heads) * std::max(shape.d_k, shape.d_v) * kBlockRows >
        int_max) {
      throw std::runtime_error("flash_tc: heads * d * 64 must fit in a 32-bit int");
    }
    const std::string grid_problem = launch::grid_limit_problem(
        launch::ceil_div(shape.seq_q, kBlockRows), shape.heads, shape.batch);
    if (!grid_problem.empty()) throw std::runtime_error("flash_tc: " + grid_problem);
    // The scale comes with the problem, at run(): without modifiers, either kernel may run.
    for (const bool scaled_first : {true, has_modifiers(shape)}) {
      with_kernel_type(shape, scaled_first, [](auto mma_type, auto d, auto scales_first) {
        configure_kernel<decltype(mma_type), decltype(d)::value, decltype(scales_first)::value>();
      });
    }
    document_starts_ = upload_document_starts(shape.mask, workspace);
    prepared_ = true;
  }

  void run(const Problem& problem) override {
    if (!prepared_) throw std::runtime_error("flash_tc: run() before prepare()");
    const Shape& s = problem.shape;
    const AttentionParams params = make_attention_params(problem, document_starts_);
    // cp.async and the O stores move 16 bytes (eight elements) at a time.
    for (const bool aligned : {params.q_aligned_rows, params.k_aligned_rows, params.v_aligned_rows,
                               params.o_aligned_rows}) {
      if (!aligned) {
        throw std::runtime_error(
            "flash_tc: tensors must be 16-byte aligned with strides a multiple of 8 elements");
      }
    }
    const auto stream = static_cast<cudaStream_t>(problem.stream);
    const bool scaled_first = flash_tc::scores_scaled_first(has_modifiers(s), params.scale_log2);
    with_kernel_type(s, scaled_first, [&](auto mma_type, auto d, auto scales_first) {
      launch_kernel<decltype(mma_type), decltype(d)::value, decltype(scales_first)::value>(
          params, s, stream);
    });
  }

 private:
  bool prepared_ = false;
  const int* document_starts_ = nullptr;  // in the workspace; null unless the mask is documents
};

}  // namespace

ATTNBENCH_REGISTER_VARIANT(FlashTcVariant);

}  // namespace attnbench
