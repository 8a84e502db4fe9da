// flash_cpu's forward on matrix tiles (the amx_bf16 path, tile_query_block.h): its block sizes,
// its job, its scratch, and its entry points, shared by the variant and the two translation units
// that compile it (kernels_amx_bf16.cpp on AMX, kernels_amx_bf16_emulated.cpp on the emulated
// tiles). Every tile is 16 rows x 64 bytes: 16 fp32 scores or outputs, or 32 bf16 operands.
//
// Layout. K and V are packed once per (batch, KV head, block of 64 keys), before any query
// block, into one workspace buffer that every query block of every head of the GQA group reads:
// K as [64 keys][d_k padded to 32] bf16 (a tile's rows are keys), V transposed as
// [d_v padded to 32][64 keys] bf16 (a tile's rows are output columns); padding keys and columns
// are zeros, so they add nothing to any product. Per thread: the query block's Q in bf16 pairs
// [d_k / 2][96 queries] (a tile's rows are pairs of d), the 64 x 96 score tile key-major (as the
// vector paths' softmax reads it), the O accumulator transposed [d_v][96], and the row stats.
#pragma once

#include <cstdint>

#include "variants/cpu/flash_cpu/blocks.h"

namespace attnbench::flash_cpu {

constexpr int64_t kTileKeyBlock = 64;  // keys per key block: 4 tiles of S, 2 tiles deep in P V
constexpr int64_t kTileDepth = 32;     // bf16 values per tile row
constexpr int64_t kTileEdge = 16;      // rows per tile, and fp32 values per tile row
// The widest d_k and d_v the tile path takes (its scratch grows with both).
constexpr int64_t kTileMaxD = 256;

struct TileLayout {
  int64_t dk_padded, dv_padded;  // d_k, d_v rounded up to kTileDepth
  int64_t key_blocks;            // per (batch, KV head)
  int64_t packed_block;          // bf16 values of one packed K and V block
  int64_t packed;                // bf16 values of the whole packed K and V
  // Floats per thread: Q pairs, scores, O transposed, stats, one 32 x 32 staging block.
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
    per_thread = q_pairs + scores + out + stats + staging;
  }

  int64_t packed_bytes() const { return packed * 2; }
};

// One forward pass on tiles: the vector paths' job (mask, scale, tensors) and the packed K and V.
struct TileJob {
  Job job;
  TileLayout layout;
  uint16_t* packed;
};

// One thread's scratch: the fields the vector softmax (softmax.h) reads, and the tile path's own.
struct TileScratch {
  Scratch vectors;    // scores, row_max, row_sum, alpha, block_max (the rest unused)
  uint32_t* q_pairs;  // [dk_padded / 2][kQueryBlock]
  float* out_t;       // [dv_padded][kQueryBlock]
  float* staging;     // [32][32]: a 2 x 2 block of output tiles on its way to out_t

  static TileScratch carve(const TileLayout& layout, float* base) {
    TileScratch scratch;
    scratch.vectors = Scratch{};
    scratch.q_pairs = reinterpret_cast<uint32_t*>(base);
    scratch.vectors.scores = base + layout.q_pairs;
    scratch.out_t = scratch.vectors.scores + layout.scores;
    scratch.vectors.row_max = scratch.out_t + layout.out;
    scratch.vectors.row_sum = scratch.vectors.row_max + kQueryBlock;
    scratch.vectors.alpha = scratch.vectors.row_sum + kQueryBlock;
    scratch.vectors.block_max = scratch.vectors.alpha + kQueryBlock;
    scratch.staging = scratch.vectors.block_max + kQueryBlock;
    return scratch;
  }
};

struct TileKernels {
  // Before and after a thread's work in a parallel region: its tiles configured, then released.
  void (*begin)();
  void (*end)();
  // Packs K and V of item = (batch * kv_heads + kv_head) * key_blocks + key_block.
  void (*pack)(const TileJob& job, int64_t item);
  // Attends query block `item` (numbered as Job's) over its visible keys.
  void (*query_block)(const TileJob& job, int64_t item, const TileScratch& scratch);
  // c[16][16] += a[16][32] b (16 rows of 16 bf16 pairs), once, through the path's tile layer:
  // for the tests that hold the layer against a float64 product and the emulation against AMX.
  void (*tile_product)(const uint16_t* a, const uint16_t* b, float* c);
};

TileKernels amx_bf16_kernels();           // on AMX (run only where CpuFeatures has it)
TileKernels amx_bf16_emulated_kernels();  // the same code on emulated tiles (needs avx512_bf16)

}  // namespace attnbench::flash_cpu
