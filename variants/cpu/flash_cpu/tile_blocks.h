// flash_cpu's forward and backward on matrix tiles (the amx_bf16 path, forward_tile_query_block.h
// and backward_tile_key_block.h): their block sizes, jobs, scratch and entry points, shared by the
// variant and the two translation units that compile them (kernels_amx_bf16.cpp on AMX,
// kernels_amx_bf16_emulated.cpp on the emulated tiles). Every tile is 16 rows x 64 bytes: 16 fp32
// scores or outputs, or 32 bf16 operands.
//
// Layout. K and V are packed once per (batch, KV head, block of 128 keys), before any query
// block, into one workspace buffer that every query block of every head of the GQA group reads:
// K as [128 keys][d_k padded to 32] bf16 (a tile's rows are keys), V transposed as
// [d_v padded to 32][128 keys] bf16 (a tile's rows are output columns); padding keys and columns
// are zeros, so they add nothing to any product. Per thread, for each query block of its group
// (up to kTileQueryGroup of one head, walked over the keys together): the query block's Q in bf16
// pairs [d_k / 2][96 queries] (a tile's rows are pairs of d), the O accumulator transposed
// [d_v][96] and the row stats; shared by the group, the 128 x 96 scores key-major (as the vector
// paths' softmax reads them; P's bf16 pairs and the forward's 32-key panels live there too).
#pragma once

#include <cstdint>

#include "variants/cpu/flash_cpu/backward_blocks.h"
#include "variants/cpu/flash_cpu/forward_blocks.h"

namespace attnbench::flash_cpu {

constexpr int64_t kTileKeyBlock = 128;  // keys per key block: 8 tiles of S, 4 tiles deep in P V
// Keys per key block of the backward (a thread's unit): its dK and dV accumulators and its K, V
// and Kᵀ stay with the thread while every query block that sees them goes by, so a longer block
// fetches each query block's Q, dO and statistics fewer times. Issue 34's eight shapes, bf16
// (results/backward-keyblock-ab): 256 keys 0.87-0.91 of 128's time without a mask, 1.05 under a
// causal one at n 1024 (more of a longer block lies past the diagonal); 512 faster again without
// a mask, slower again at n 1024 causal.
constexpr int64_t kTileBackwardKeyBlock = 256;
// Query blocks whose dV += Pᵀ dO and dK += dSᵀ Q the tile backward takes as one product, queries
// deep: each 32 x 32 block of the dK and dV accumulators (in L2) is loaded onto the tiles and
// stored back once per 192 queries rather than per 96, its 8 tile moves amortised over 24
// products rather than 12. Their P and dS rows wait side by side ([key][2 x kQueryBlock]).
constexpr int64_t kTileBackwardQueryPair = 2;
constexpr int64_t kTileBackwardRowWidth = kTileBackwardQueryPair * kQueryBlock;
constexpr int64_t kTileDepth = 32;  // bf16 values per tile row
constexpr int64_t kTileEdge = 16;   // rows per tile, and fp32 values per tile row
// The most query blocks the tile forward walks the keys with at once (a thread's work item): each
// key block's K and V, read from L2 or beyond for the first, are in L1 or L2 for the others
// (n 4096, d 128: 2 blocks 4% faster than 1, 4 blocks 8%, 8 no faster than 4).
constexpr int64_t kTileQueryGroup = 4;
// The widest d_k and d_v the tile path takes (its scratch grows with both).
constexpr int64_t kTileMaxD = 256;

struct TileLayout {
  int64_t dk_padded, dv_padded;  // d_k, d_v rounded up to kTileDepth
  int64_t key_blocks;            // per (batch, KV head)
  int64_t packed_block;          // bf16 values of one packed K and V block
  int64_t packed;                // bf16 values of the whole packed K and V
  // Floats per thread: per query block of the group Q pairs, O transposed and stats; shared by
  // the group the scores and one 32 x 32 staging block.
  int64_t q_pairs, scores, out, stats, staging, per_thread;

  explicit TileLayout(const Shape& s) {
    dk_padded = round_up(s.d_k, kTileDepth);
    dv_padded = round_up(s.d_v, kTileDepth);
    key_blocks = (s.seq_kv + kTileKeyBlock - 1) / kTileKeyBlock;
    packed_block = kTileKeyBlock * (dk_padded + dv_padded);
    packed = s.batch * s.kv_heads * key_blocks * packed_block;
    q_pairs = dk_padded / 2 * kQueryBlock;
    scores = kTileKeyBlock * kQueryBlock;
    out = dv_padded * kQueryBlock;
    stats = 4 * kQueryBlock;
    staging = 4 * kTileEdge * kTileEdge;
    per_thread = kTileQueryGroup * (q_pairs + out + stats) + scores + staging;
  }

  int64_t packed_bytes() const { return packed * 2; }
};

// One forward pass on tiles: the vector paths' job (mask, scale, tensors) and the packed K and V.
struct TileJob {
  Job job;
  TileLayout layout;
  uint16_t* packed;

  int64_t group;  // query blocks per work item, at most kTileQueryGroup

  // Work items: groups of `group` query blocks of one (batch, head), the last short.
  int64_t groups_per_head() const { return (job.query_blocks + group - 1) / group; }
  int64_t groups() const { return job.shape.batch * job.shape.heads * groups_per_head(); }

  // The largest group (up to kTileQueryGroup) that still leaves `threads` threads at least four
  // work items each, so that the dynamic schedule keeps every one busy to the end.
  static int64_t group_for(const Job& job, int64_t threads) {
    int64_t group = kTileQueryGroup;
    const int64_t heads = job.shape.batch * job.shape.heads;
    while (group > 1 && heads * ((job.query_blocks + group - 1) / group) < 4 * threads) --group;
    return group;
  }
};

// One query block's scratch: the fields the vector softmax (softmax.h) reads, and the tile path's
// own. The scores and the staging block are the group's, the rest the query block's.
struct TileScratch {
  Scratch vectors;    // scores, row_max, row_sum, alpha, block_max (the rest unused)
  uint32_t* q_pairs;  // [dk_padded / 2][kQueryBlock]
  float* out_t;       // [dv_padded][kQueryBlock]
  float* staging;     // [32][32]: a 2 x 2 block of output tiles on its way to out_t
};

// One thread's scratch: a TileScratch for each query block of its group, from `base`.
struct TileGroupScratch {
  TileScratch member[kTileQueryGroup];

  static TileGroupScratch carve(const TileLayout& layout, float* base) {
    TileGroupScratch group;
    float* const scores = base;
    float* const staging = scores + layout.scores;
    float* own = staging + layout.staging;
    for (TileScratch& scratch : group.member) {
      scratch.vectors = Scratch{};
      scratch.vectors.scores = scores;
      scratch.staging = staging;
      scratch.q_pairs = reinterpret_cast<uint32_t*>(own);
      scratch.out_t = own + layout.q_pairs;
      scratch.vectors.row_max = scratch.out_t + layout.out;
      scratch.vectors.row_sum = scratch.vectors.row_max + kQueryBlock;
      scratch.vectors.alpha = scratch.vectors.row_sum + kQueryBlock;
      scratch.vectors.block_max = scratch.vectors.alpha + kQueryBlock;
      own = scratch.vectors.block_max + kQueryBlock;
    }
    return group;
  }
};

// The backward on tiles (backward_tile_key_block.h): the vector backward's split
// (backward_blocks.h: a thread owns a block of kTileBackwardKeyBlock keys of one (batch, KV head),
// its dK and dV, and walks every query block of the group that sees it; dQ into the thread's own
// fp32 copy, the copies summed in a fixed order), its five products on tiles. Layout. Q and dO are
// packed once, before the key blocks, per (batch, head, query block of kQueryBlock rows), in the
// two forms the products take as B: in pairs of d ([d / 2][kQueryBlock], for S and dP) and in pairs
// of queries ([kQueryBlock / 2] [d padded], for dK and dV); every key block that sees the query
// block reads them. Per thread: the key block's K and V as rows ([key][d padded], for S and dP) and
// Kᵀ ([d_k padded][key], for dQ), bf16; the key-major scores and dP (then P and dS, fp32), 1 -
// tanh² of capped scores, P and dS rounded to bf16 rows ([key][kTileBackwardRowWidth], two query
// blocks side by side, for dV and dK); the dK and dV accumulators (fp32, [key][d padded]); a 32 x
// 32 staging block; the query block's L and D; and the dQ copy
// ([batch * heads * seq_q][d_k padded]).
struct TileBackwardLayout {
  int64_t dk_padded, dv_padded;
  int64_t key_blocks, query_blocks;  // per (batch, KV head), per (batch, head)
  int64_t packed_query_block;        // 32-bit pairs of one query block's packed Q and dO
  int64_t packed_queries;            // 32-bit pairs of all of them
  // Floats per thread: packed K, V, Kᵀ; scores, dS, the soft-cap's slope; P and dS rows; dK, dV;
  // staging; L, D.
  int64_t k_rows, v_rows, k_t, scores, rows_bf16, dk, dv, staging, stats, per_thread;
  int64_t dq;  // floats of one thread's dQ copy

  explicit TileBackwardLayout(const Shape& s) {
    dk_padded = round_up(s.d_k, kTileDepth);
    dv_padded = round_up(s.d_v, kTileDepth);
    key_blocks = (s.seq_kv + kTileBackwardKeyBlock - 1) / kTileBackwardKeyBlock;
    query_blocks = (s.seq_q + kQueryBlock - 1) / kQueryBlock;
    packed_query_block = kQueryBlock * (dk_padded + dv_padded);
    packed_queries = s.batch * s.heads * query_blocks * packed_query_block;
    k_rows = kTileBackwardKeyBlock * dk_padded / 2;
    v_rows = kTileBackwardKeyBlock * dv_padded / 2;
    k_t = k_rows;
    scores = kTileBackwardKeyBlock * kQueryBlock;
    rows_bf16 = kTileBackwardKeyBlock * kTileBackwardRowWidth / 2;
    dk = kTileBackwardKeyBlock * dk_padded;
    dv = kTileBackwardKeyBlock * dv_padded;
    staging = 4 * kTileEdge * kTileEdge;
    stats = 2 * kQueryBlock;
    per_thread = k_rows + v_rows + k_t + 3 * scores + 2 * rows_bf16 + dk + dv + staging + stats;
    dq = s.batch * s.heads * s.seq_q * dk_padded;
  }

  int64_t packed_query_bytes() const { return packed_queries * 4; }
};

// One backward pass on tiles: the vector backward's job (with key blocks of kTileBackwardKeyBlock
// and the padded strides), the forward's (where its query blocks sit: locate_query_block), the
// packed Q and dO, and where the packing writes D (grads.delta, which the key blocks read).
struct TileBackwardJob {
  KeyBlockJob grads;
  Job queries;
  TileBackwardLayout layout;
  uint32_t* packed_queries;
  float* delta;
};

struct TileBackwardScratch {
  uint16_t* k_rows;   // [kTileBackwardKeyBlock][dk_padded]
  uint16_t* v_rows;   // [kTileBackwardKeyBlock][dv_padded]
  uint16_t* k_t;      // [dk_padded][kTileBackwardKeyBlock]
  float* scores;      // [kTileBackwardKeyBlock][kQueryBlock]: S, then P
  float* ds;          // [kTileBackwardKeyBlock][kQueryBlock]: dP, then dS, then dS in key pairs
  float* capped;      // [kTileBackwardKeyBlock][kQueryBlock]: 1 - tanh² of the capped scores
  uint16_t* p_rows;   // [kTileBackwardKeyBlock][kTileBackwardRowWidth]: P in bf16
  uint16_t* ds_rows;  // [kTileBackwardKeyBlock][kTileBackwardRowWidth]: dS in bf16
  float* dk;          // [kTileBackwardKeyBlock][dk_padded]
  float* dv;          // [kTileBackwardKeyBlock][dv_padded]
  float* staging;     // [32][32]
  float* lse;         // [kQueryBlock]: the query block's L (+inf past its rows)
  float* delta;       // [kQueryBlock]: its D (0 past its rows and where L is +inf)
  float* dq;          // this thread's dQ copy

  static TileBackwardScratch carve(const TileBackwardLayout& layout, float* base, float* dq_copy) {
    TileBackwardScratch scratch;
    scratch.k_rows = reinterpret_cast<uint16_t*>(base);
    scratch.v_rows = reinterpret_cast<uint16_t*>(base + layout.k_rows);
    scratch.k_t = reinterpret_cast<uint16_t*>(base + layout.k_rows + layout.v_rows);
    scratch.scores = base + layout.k_rows + layout.v_rows + layout.k_t;
    scratch.ds = scratch.scores + layout.scores;
    scratch.capped = scratch.ds + layout.scores;
    scratch.p_rows = reinterpret_cast<uint16_t*>(scratch.capped + layout.scores);
    scratch.ds_rows =
        reinterpret_cast<uint16_t*>(scratch.capped + layout.scores + layout.rows_bf16);
    scratch.dk = scratch.capped + layout.scores + 2 * layout.rows_bf16;
    scratch.dv = scratch.dk + layout.dk;
    scratch.staging = scratch.dv + layout.dv;
    scratch.lse = scratch.staging + layout.staging;
    scratch.delta = scratch.lse + kQueryBlock;
    scratch.dq = dq_copy;
    return scratch;
  }
};

struct TileKernels {
  // Before and after a thread's work in a parallel region: its tiles configured, then released.
  void (*begin)();
  void (*end)();
  // Packs K and V of item = (batch * kv_heads + kv_head) * key_blocks + key_block.
  void (*pack)(const TileJob& job, int64_t item);
  // Attends the query blocks of group `item` (numbered as TileJob's) over their visible keys.
  void (*forward_query_group)(const TileJob& job, int64_t item, const TileGroupScratch& scratch);
  // c[16][16] += a[16][32] b (16 rows of 16 bf16 pairs), once, through the path's tile layer:
  // for the tests that hold the layer against a float64 product and the emulation against AMX.
  void (*tile_product)(const uint16_t* a, const uint16_t* b, float* c);
  // The backward: packs Q and dO of query block item = (batch * heads + head) * query_blocks +
  // query block, and writes its rows' D; then adds key block item's share of dQ into scratch.dq and
  // writes its dK and dV (items numbered as KeyBlockJob's).
  void (*pack_backward_queries)(const TileBackwardJob& job, int64_t item);
  void (*backward_key_block)(const TileBackwardJob& job, int64_t item,
                             const TileBackwardScratch& scratch);
};

TileKernels amx_bf16_kernels();           // on AMX (run only where CpuFeatures has it)
TileKernels amx_bf16_emulated_kernels();  // the same code on emulated tiles (needs avx512_bf16)

}  // namespace attnbench::flash_cpu
