// flash_cpu's units of work for the backward pass (FlashAttention-2's), shared by the variant
// (flash_cpu.cpp) and its kernels (backward_key_block.h, compiled per SIMD path in
// kernels_<isa>.cpp): one backward pass as every key block sees it (KeyBlockJob), a thread's
// scratch and its layout.
//
// The work is split by key blocks of kBackwardKeys keys of one (batch, kv head): the thread that
// owns one keeps its K and V rows and its dK and dV accumulators (kBackwardKeys x d each) in L2
// while it walks every query block of kQueryBlock rows (of every query head of the group) that sees
// it, so dK and dV are written once, by one thread, with no race. dQ sums over key blocks owned by
// different threads: each thread adds into its own fp32 copy of dQ, and the copies are summed
// after the parallel loop (the order of the work is fixed, so repeated runs agree to the bit).
// Memory: per thread O(kBackwardKeys * d + kQueryBlock * d) of tiles, plus its dQ copy (seq_q * d_k
// per head): threads * |dQ| in all, besides L and D (one float per query row each).
#pragma once

#include <cstdint>

#include "variants/cpu/flash_cpu/forward_blocks.h"

namespace attnbench::flash_cpu {

// Keys per key block of the backward: 96, twice the forward's block. Each query tile's dQ rows
// are read and written once per key block, and Q and dO streamed once, so a longer block halves
// that traffic per FLOP (measured: ~20% faster than 48 at n 4096 on Zen 3; 144 was no faster).
// K, Kᵀ, Vᵀ, dK, dV (96 x d each) and the query tile stay within a 512 KiB L2 at d 128.
constexpr int64_t kBackwardKeys = 96;
static_assert(kBackwardKeys <= kQueryBlock, "ALiBi's key offsets come from kColumnIndex");

// One backward pass, as every key block sees it. Key blocks are numbered item = 0 ..
// batch * kv_heads * key_blocks - 1.
struct KeyBlockJob {
  Shape shape;
  float scale;               // the forward's scale: dS carries it into dQ and dK
  float scale_log2;          // scale * log2(e): scores are recomputed in base 2, as the forward's
  float softcap_log2;        // shape.softcap * log2(e), or 0 for none
  const MaskGeometry* mask;  // which keys each query row sees
  AttentionViews tensors;    // Q, K, V, O in shape.dtype and shape.layout
  TensorView dout;           // dO, as O
  TensorView dk, dv;         // fp32, written once per key block
  const float* lse;          // [batch * heads][seq_q]: the forward's log2-sum-exp2 per query row
  const float* delta;        // [batch * heads][seq_q]: D = rowsum(dO o O) per query row
  int64_t key_blocks;        // per (batch, kv head)
  int64_t dk_stride, dv_stride;  // row strides of the padded tiles (multiples of kMaxWidth)
  // The forward's S came from vdpbf16ps pairs (bf16_dot.h, the avx512_bf16 path): the backward
  // recomputes it from the same pairs, in the same order (backward_key_block.h).
  bool bf16_dot = false;
};

// One thread's scratch: the tiles of one key block and one query block, and its dQ copy. The
// score-shaped tiles are query-major: [query][key], kBackwardKeys floats a row.
struct KeyBlockScratch {
  float* k_rows;  // [kBackwardKeys][dk_stride]: the key block's K, fp32, zero-padded
  float* k_t;     // [d_k][kBackwardKeys]: its Kᵀ (under bf16_dot, Kᵀ's pairs: [d_k / 2][keys])
  float* v_t;     // [d_v][kBackwardKeys]: its Vᵀ
  float* dk;      // [kBackwardKeys][dk_stride]: its dK accumulator
  float* dv;      // [kBackwardKeys][dv_stride]: its dV accumulator
  float* q_rows;  // [kQueryBlock][dk_stride]: a query block's Q, when not read in place
  float* q_scaled;  // [kQueryBlock][dk_stride]: its Q times scale_log2, as the forward's S reads it
  float* dout_rows;  // [kQueryBlock][dv_stride]: its dO, when not read in place
  float* p;          // [kQueryBlock][kBackwardKeys]: scores, then P
  float* ds;         // [kQueryBlock][kBackwardKeys]: dP, then dS
  float* capped;     // [kQueryBlock][kBackwardKeys]: 1 - tanh² of the soft-capped scores
  float* lse;        // [kQueryBlock]: the block's L
  float* delta;      // [kQueryBlock]: the block's D
  float* dq;         // [batch * heads * seq_q][dk_stride]: this thread's share of dQ
};

struct KeyBlockLayout {
  int64_t dk_stride, dv_stride;
  int64_t tiles;  // floats of one thread's tiles (a multiple of 16)
  int64_t dq;     // floats of one thread's dQ copy

  explicit KeyBlockLayout(const Shape& s)
      : dk_stride(round_up(s.d_k, kMaxWidth)), dv_stride(round_up(s.d_v, kMaxWidth)) {
    const int64_t key_tiles = kBackwardKeys * (3 * dk_stride + 2 * dv_stride);
    const int64_t query_tiles = kQueryBlock * (2 * dk_stride + dv_stride);
    tiles = key_tiles + query_tiles + 3 * kQueryBlock * kBackwardKeys + 2 * kQueryBlock;
    dq = s.batch * s.heads * s.seq_q * dk_stride;
  }

  // The tiles at `base` (tiles floats), the dQ copy at `dq_copy` (dq floats).
  KeyBlockScratch carve(float* base, float* dq_copy) const {
    KeyBlockScratch scratch;
    scratch.k_rows = base;
    scratch.k_t = scratch.k_rows + kBackwardKeys * dk_stride;
    scratch.v_t = scratch.k_t + kBackwardKeys * dk_stride;
    scratch.dk = scratch.v_t + kBackwardKeys * dv_stride;
    scratch.dv = scratch.dk + kBackwardKeys * dk_stride;
    scratch.q_rows = scratch.dv + kBackwardKeys * dv_stride;
    scratch.q_scaled = scratch.q_rows + kQueryBlock * dk_stride;
    scratch.dout_rows = scratch.q_scaled + kQueryBlock * dk_stride;
    scratch.p = scratch.dout_rows + kQueryBlock * dv_stride;
    scratch.ds = scratch.p + kQueryBlock * kBackwardKeys;
    scratch.capped = scratch.ds + kQueryBlock * kBackwardKeys;
    scratch.lse = scratch.capped + kQueryBlock * kBackwardKeys;
    scratch.delta = scratch.lse + kQueryBlock;
    scratch.dq = dq_copy;
    return scratch;
  }
};

// The backward of one key block of one (batch, kv head): adds its share of dQ into scratch.dq
// and writes its rows of dK and dV.
using KeyBlockFunction = void (*)(const KeyBlockJob& job, int64_t item,
                                  const KeyBlockScratch& scratch);

}  // namespace attnbench::flash_cpu
