// flash_cpu's backward with its five products on matrix tiles (TDPBF16PS, fp32 accumulators) and
// the elementwise steps between them on AVX-512: the amx_bf16 path's backward, for bf16 inputs.
// Written once against the tile layer and compiled with the forward (forward_tile_query_block.h,
// whose tile steps, packing and classification it reuses) on AMX and on the emulated tiles.
//
// The split is the vector backward's (backward_key_block.h): a thread owns one block of 256 keys of
// a (batch, KV head), and walks every query block of the group that sees it. The scores are
// key-major, as in the forward, so L and D are per-column vectors and every operand is a tile as
// packed (tile_blocks.h):
//   Sᵀ  = K Qᵀ        A = K rows,         B = Q in pairs of d        (the forward's score step)
//   dPᵀ = V dOᵀ       A = V rows,         B = dO in pairs of d
//   P = exp2(S - L), dS = scale P o (dP - D) (o (1 - tanh²) under softcap), on AVX-512, with
//   D = rowsum(dO o O) taken (AVX-512) as dO is packed;
//   P and dS rounded to bf16 (as FlashAttention rounds them), as rows and dS also in key pairs
//   dV += Pᵀ dO       A = P rows,         B = dO in pairs of queries, C = the dV accumulator
//   dK += dSᵀ Q       A = dS rows,        B = Q in pairs of queries,  C = the dK accumulator
//                     (these two for two query blocks at once: kTileBackwardQueryPair)
//   dQᵀ = Kᵀ dSᵀ      A = Kᵀ,             B = dS in key pairs (the forward's Vᵀ Pᵀ step), staged
//                     and added, transposed, into the thread's dQ copy
// Masks as in the forward: key and query blocks that do not meet are skipped, blocks a mask edge
// cuts through are masked element by element, and within those 32 x 32 blocks of tiles no query
// sees are skipped in all five products. The query blocks are the forward's (96 rows from a
// multiple of 96, where the vector backward starts its at the first row that sees the key block),
// so that Q and dO are packed once per backward, before the key blocks, and read by every key
// block; K, V and Kᵀ are packed once per key block, by the thread that owns it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "variants/cpu/flash_cpu/backward_key_block.h"
#include "variants/cpu/flash_cpu/forward_tile_query_block.h"

namespace attnbench::flash_cpu {

template <class Ops, class Tiles>
struct TileBackward {
  using V = typename Ops::V;
  using Forward = TileForward<Ops, Tiles>;

  // One query block's packed Q and dO (tile_blocks.h), item = (batch * heads + head) *
  // query_blocks + query block: each in pairs of d and in pairs of queries.
  struct PackedQueries {
    uint32_t *q_of_d, *q_of_rows, *dout_of_d, *dout_of_rows;

    static PackedQueries at(const TileBackwardJob& tile_job, int64_t item) {
      const TileBackwardLayout& layout = tile_job.layout;
      PackedQueries packed;
      packed.q_of_d = tile_job.packed_queries + item * layout.packed_query_block;
      packed.q_of_rows = packed.q_of_d + kQueryBlock * layout.dk_padded / 2;
      packed.dout_of_d = packed.q_of_rows + kQueryBlock * layout.dk_padded / 2;
      packed.dout_of_rows = packed.dout_of_d + kQueryBlock * layout.dv_padded / 2;
      return packed;
    }
  };

  // A query block whose P and dS rows wait for dV and dK (kTileBackwardQueryPair): where it
  // sits, what of the key block it sees, and its packed Q and dO.
  struct WaitingBlock {
    QueryBlock block;
    bool partial;
    TileKeys tile;
    PackedQueries packed;
  };

  // pairs[r][c] = (x[2r][c], x[2r + 1][c]) for `rows` rows of `view` from `first`, zero past d
  // and past the rows up to kQueryBlock: the B operand whose rows are pairs of queries.
  static void pack_pairs_of_rows(const TensorView& view, int64_t batch, int64_t head, int64_t first,
                                 int64_t rows, int64_t d, int64_t d_padded, uint32_t* pairs) {
    std::fill(pairs, pairs + kQueryBlock / 2 * d_padded, 0u);  // [query pair][column]
    // 16 columns of two rows at a time, each value widened into its half of a 32-bit pair.
    for (int64_t i = 0; i < rows; i += 2) {
      const uint16_t* even = view.row<const uint16_t>(batch, head, first + i);
      const uint16_t* odd =
          i + 1 < rows ? view.row<const uint16_t>(batch, head, first + i + 1) : nullptr;
      for (int64_t c = 0; c < d; c += 16) {
        const auto lanes = static_cast<__mmask16>(d - c >= 16 ? 0xFFFF : (1u << (d - c)) - 1);
        const __m512i low = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(lanes, even + c));
        const __m512i high =
            odd == nullptr
                ? _mm512_setzero_si512()
                : _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(lanes, odd + c)),
                                    16);
        _mm512_mask_storeu_epi32(pairs + (i / 2) * d_padded + c, lanes, _mm512_or_si512(low, high));
      }
    }
  }

  // sum_c a[c] b[c] of two bf16 rows, in fp32.
  static float dot_bf16_rows(const uint16_t* a, const uint16_t* b, int64_t count) {
    const auto widen = [](__m256i bits) {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
    };
    __m512 sum = _mm512_setzero_ps();
    for (int64_t c = 0; c < count; c += 16) {
      const auto lanes = static_cast<__mmask16>(count - c >= 16 ? 0xFFFF : (1u << (count - c)) - 1);
      sum = _mm512_fmadd_ps(widen(_mm256_maskz_loadu_epi16(lanes, a + c)),
                            widen(_mm256_maskz_loadu_epi16(lanes, b + c)), sum);
    }
    return _mm512_reduce_add_ps(sum);
  }

  // Q and dO of one query block, each in pairs of d and in pairs of queries (tile_blocks.h), and
  // D = rowsum(dO o O) of its rows while dO is at hand.
  static void pack_queries(const TileBackwardJob& tile_job, int64_t item) {
    const KeyBlockJob& job = tile_job.grads;
    const Shape& s = job.shape;
    const TileBackwardLayout& layout = tile_job.layout;
    const int64_t query_block = item % layout.query_blocks;
    const int64_t head = item / layout.query_blocks % s.heads;
    const int64_t batch = item / layout.query_blocks / s.heads;
    const int64_t first = query_block * kQueryBlock;
    const int64_t rows = std::min(kQueryBlock, s.seq_q - first);
    const PackedQueries packed = PackedQueries::at(tile_job, item);
    Forward::pack_pairs_of_d(job.tensors.q, batch, head, first, rows, kQueryBlock, s.d_k,
                             layout.dk_padded, packed.q_of_d);
    pack_pairs_of_rows(job.tensors.q, batch, head, first, rows, s.d_k, layout.dk_padded,
                       packed.q_of_rows);
    Forward::pack_pairs_of_d(job.dout, batch, head, first, rows, kQueryBlock, s.d_v,
                             layout.dv_padded, packed.dout_of_d);
    pack_pairs_of_rows(job.dout, batch, head, first, rows, s.d_v, layout.dv_padded,
                       packed.dout_of_rows);
    float* delta = tile_job.delta + (batch * s.heads + head) * s.seq_q + first;
    for (int64_t i = 0; i < rows; ++i)
      delta[i] = dot_bf16_rows(job.dout.row<const uint16_t>(batch, head, first + i),
                               job.tensors.o.row<const uint16_t>(batch, head, first + i), s.d_v);
  }

  // The key block's K and V as rows and K transposed, zero-padded; dK and dV start at zero, and
  // the score-shaped scratch too: the 32 x 32 blocks a partial block skips keep what an earlier
  // query block left (finite: scores, P, dS, or dS's bf16 key pairs read as floats), which P = 0
  // there cancels.
  static void load_key_block(const TileBackwardJob& tile_job, int64_t batch, int64_t kv_head,
                             int64_t first_key, int64_t keys, const TileBackwardScratch& scratch) {
    const KeyBlockJob& job = tile_job.grads;
    const Shape& s = job.shape;
    const TileBackwardLayout& layout = tile_job.layout;
    std::fill(scratch.k_rows, scratch.k_rows + kTileBackwardKeyBlock * layout.dk_padded,
              uint16_t{0});
    std::fill(scratch.v_rows, scratch.v_rows + kTileBackwardKeyBlock * layout.dv_padded,
              uint16_t{0});
    std::fill(scratch.k_t, scratch.k_t + kTileBackwardKeyBlock * layout.dk_padded, uint16_t{0});
    Forward::pack_rows(job.tensors.k, batch, kv_head, first_key, keys, s.d_k, layout.dk_padded,
                       scratch.k_rows);
    Forward::pack_rows(job.tensors.v, batch, kv_head, first_key, keys, s.d_v, layout.dv_padded,
                       scratch.v_rows);
    Forward::template pack_columns<kTileBackwardKeyBlock>(job.tensors.k, batch, kv_head, first_key,
                                                          keys, s.d_k, scratch.k_t);
    std::fill(scratch.dk, scratch.dk + layout.dk, 0.0f);
    std::fill(scratch.dv, scratch.dv + layout.dv, 0.0f);
    std::fill(scratch.scores, scratch.scores + 2 * layout.scores, 0.0f);  // scores and ds
    std::fill(scratch.capped, scratch.capped + layout.scores, 0.0f);
  }

  // The query block's L and D as column vectors: a padding column, or a row that sees no key
  // (L = +inf), gets P = 0 and D = 0.
  static void load_row_stats(const KeyBlockJob& job, const QueryBlock& block,
                             const TileBackwardScratch& scratch) {
    const Shape& s = job.shape;
    const int64_t row_index = (block.batch * s.heads + block.head) * s.seq_q + block.first_query;
    for (int64_t i = 0; i < block.columns; ++i) {
      const bool row = i < block.rows;
      scratch.lse[i] = row ? job.lse[row_index + i] : std::numeric_limits<float>::infinity();
      scratch.delta[i] = row && !std::isinf(scratch.lse[i]) ? job.delta[row_index + i] : 0.0f;
    }
  }

  // P = exp2(S - L) key-major: Sᵀ as the forward computed it (into base 2, soft-capped with
  // the cap's slope 1 - tanh² kept, ALiBi, the mask of a partial block).
  static void recompute_probabilities(const TileBackwardJob& tile_job, const QueryBlock& block,
                                      int64_t first_key, int64_t keys, bool partial,
                                      const TileKeys& tile, const uint32_t* q_of_d,
                                      const TileBackwardScratch& scratch) {
    const KeyBlockJob& job = tile_job.grads;
    float* scores = scratch.scores;
    Forward::key_major_product(scratch.k_rows, tile_job.layout.dk_padded, q_of_d, keys,
                               block.columns, partial, tile, scores);
    const V scale = Ops::broadcast(job.scale_log2);
    if (!block.modified && !partial) {
      // Nothing between the scale and the exponential: one pass over the panel (from L2) instead
      // of two, the product rounded as the two passes round it (the compiler would otherwise fuse
      // it with the subtraction).
      for (int64_t i = 0; i < block.columns; i += Ops::kWidth) {
        const V lse = Ops::load(scratch.lse + i);
        for (int64_t j = 0; j < keys; ++j) {
          float* score = scores + j * kQueryBlock + i;
          const V scaled = _mm512_mul_round_ps(Ops::load(score), scale,
                                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
          Ops::store(score, Ops::exp2(Ops::sub(scaled, lse)));
        }
      }
      return;
    }
    for (int64_t j = 0; j < keys; ++j)
      for (int64_t i = 0; i < block.columns; i += Ops::kWidth) {
        float* score = scores + j * kQueryBlock + i;
        Ops::store(score, Ops::mul(Ops::load(score), scale));
      }
    if (block.modified)
      modify_scores<Ops>(job.softcap_log2, block.alibi_slope_log2,
                         job.mask->position(block.first_query) - first_key, keys, block.columns,
                         scores, scratch.capped);
    if (partial) mask_scores<Ops>(tile, keys, block.columns, scores);
    for (int64_t i = 0; i < block.columns; i += Ops::kWidth) {
      const V lse = Ops::load(scratch.lse + i);
      for (int64_t j = 0; j < keys; ++j) {
        float* score = scores + j * kQueryBlock + i;
        Ops::store(score, Ops::exp2(Ops::sub(Ops::load(score), lse)));
      }
    }
  }

  // dP = dO Vᵀ key-major, then dS = scale P o (dP - D), times 1 - tanh² under softcap (ALiBi's
  // bias does not depend on Q or K: it adds nothing here). In the same pass, two keys at a time,
  // P and dS rounded to bf16 rows (the A operands whose depth is queries: p_rows, ds_rows) and dS
  // rounded to key pairs over dP's rows (pair row r over dP rows 2r and 2r + 1, after both are
  // read): each score-shaped panel (96 KiB at 256 keys, in L2) is read once, not four times.
  // Rows of zeros follow up to the next whole 32 keys.
  static void score_gradients(const TileBackwardJob& tile_job, const QueryBlock& block,
                              int64_t keys, bool partial, const TileKeys& tile,
                              const uint32_t* dout_of_d, int64_t half,
                              const TileBackwardScratch& scratch) {
    const KeyBlockJob& job = tile_job.grads;
    Forward::key_major_product(scratch.v_rows, tile_job.layout.dv_padded, dout_of_d, keys,
                               block.columns, partial, tile, scratch.ds);
    const V scale = Ops::broadcast(job.scale);
    const bool capped = job.softcap_log2 > 0;
    auto* ds_pairs = reinterpret_cast<uint32_t*>(scratch.ds);
    const auto round_row = [](uint16_t* row, V values) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(row),
                          reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(values)));
    };
    uint16_t* const p_rows = scratch.p_rows + half * kQueryBlock;
    uint16_t* const ds_rows = scratch.ds_rows + half * kQueryBlock;
    for (int64_t j = 0; j < keys; j += 2) {
      const bool has_odd_key = j + 1 < keys;
      for (int64_t i = 0; i < block.columns; i += Ops::kWidth) {
        const V delta = Ops::load(scratch.delta + i);
        const int64_t even_at = j * kQueryBlock + i, odd_at = even_at + kQueryBlock;
        const int64_t even_row = j * kTileBackwardRowWidth + i;
        const V even = score_gradient<Ops>(scale, delta, capped, scratch.scores + even_at,
                                           scratch.capped + even_at, scratch.ds + even_at);
        round_row(p_rows + even_row, Ops::load(scratch.scores + even_at));
        round_row(ds_rows + even_row, even);
        V odd = Ops::zero();
        if (has_odd_key) {
          odd = score_gradient<Ops>(scale, delta, capped, scratch.scores + odd_at,
                                    scratch.capped + odd_at, scratch.ds + odd_at);
          round_row(p_rows + even_row + kTileBackwardRowWidth, Ops::load(scratch.scores + odd_at));
          round_row(ds_rows + even_row + kTileBackwardRowWidth, odd);
        }
        _mm512_storeu_si512(ds_pairs + (j / 2) * kQueryBlock + i, Forward::to_pairs(even, odd));
      }
    }
    const int64_t tiled = round_up(keys, kTileDepth);
    for (int64_t j = keys; j < tiled; ++j) {
      std::fill_n(p_rows + j * kTileBackwardRowWidth, kQueryBlock, uint16_t{0});
      std::fill_n(ds_rows + j * kTileBackwardRowWidth, kQueryBlock, uint16_t{0});
    }
    for (int64_t r = (keys + 1) / 2; r < tiled / 2; ++r)
      std::fill(ds_pairs + r * kQueryBlock, ds_pairs + r * kQueryBlock + block.columns, 0u);
  }

  // accumulators[key][d] += rows (bf16 [key][kTileBackwardRowWidth], queries deep) times the
  // pairs of queries ([kQueryBlock / 2][d_padded]) of each waiting query block, the first's in
  // the rows' first kQueryBlock columns: dV += Pᵀ dO, dK += dSᵀ Q. Each 32 x 32 block of the
  // accumulators goes onto the tiles once for all of them.
  static void accumulate_key_rows(const uint16_t* rows, const WaitingBlock* waiting, int64_t count,
                                  bool values, int64_t d_padded, int64_t keys,
                                  float* accumulators) {
    constexpr int64_t kRowStride = kTileBackwardRowWidth * 2;  // bytes between bf16 rows
    for (int64_t j = 0; j < keys; j += 2 * kTileEdge)
      for (int64_t c = 0; c < d_padded; c += 2 * kTileEdge) {
        float* block = accumulators + j * d_padded + c;
        Forward::load_block(block, d_padded);
        for (int64_t m = 0; m < count; ++m) {
          const WaitingBlock& w = waiting[m];
          const uint32_t* query_pairs = values ? w.packed.dout_of_rows : w.packed.q_of_rows;
          const uint16_t* half = rows + m * kQueryBlock;
          for (int64_t i = 0; i < w.block.columns; i += kTileDepth) {
            if (w.partial &&
                !w.tile.sees_any(i, i + kTileDepth, j, std::min(keys, j + 2 * kTileEdge)))
              continue;
            Forward::accumulate_block(half + j * kTileBackwardRowWidth + i,
                                      half + (j + kTileEdge) * kTileBackwardRowWidth + i,
                                      kRowStride, query_pairs + (i / 2) * d_padded + c,
                                      d_padded * 4);
          }
        }
        Forward::store_block(block, d_padded);
      }
  }

  // dQᵀ = Kᵀ dSᵀ over the key block, 32 x 32 at a time, added transposed into the thread's copy.
  static void accumulate_query_gradients(const TileBackwardJob& tile_job, const QueryBlock& block,
                                         int64_t keys, bool partial, const TileKeys& tile,
                                         const TileBackwardScratch& scratch) {
    const Shape& s = tile_job.grads.shape;
    const int64_t dk_padded = tile_job.layout.dk_padded;
    const auto* ds_pairs = reinterpret_cast<const uint32_t*>(scratch.ds);
    float* dq = scratch.dq +
                ((block.batch * s.heads + block.head) * s.seq_q + block.first_query) * dk_padded;
    for (int64_t c = 0; c < dk_padded; c += 2 * kTileEdge)
      for (int64_t i = 0; i < block.columns; i += 2 * kTileEdge) {
        if (partial && !tile.sees_any(i, i + 2 * kTileEdge, 0, keys)) continue;
        Forward::template transposed_block<kTileBackwardKeyBlock>(
            scratch.k_t + c * kTileBackwardKeyBlock, ds_pairs, keys, i, partial, tile,
            scratch.staging, 2 * kTileEdge, /*add_to_c=*/false);
        add_transposed(scratch.staging, std::min(2 * kTileEdge, block.rows - i),
                       dq + i * dk_padded + c, dk_padded);
      }
  }

  // `rows` rows of dq (`dq_stride` floats apart) += the first `rows` columns of the 32 x 32 block
  // at `staging` ([column][query]), transposed 16 x 16 at a time in registers (transpose_16x16.h):
  // element by element, each addition took a strided load of its own.
  static void add_transposed(const float* staging, int64_t rows, float* dq, int64_t dq_stride) {
    for (int64_t x0 = 0; x0 < rows; x0 += kTileEdge)
      for (int64_t r0 = 0; r0 < 2 * kTileEdge; r0 += kTileEdge) {
        __m512i block[kTileEdge];
        for (int64_t r = 0; r < kTileEdge; ++r)
          block[r] = _mm512_loadu_si512(staging + (r0 + r) * 2 * kTileEdge + x0);
        transpose_16x16<Ops>(block);
        for (int64_t x = 0; x < std::min(kTileEdge, rows - x0); ++x) {
          float* row = dq + (x0 + x) * dq_stride + r0;
          _mm512_storeu_ps(row, _mm512_add_ps(_mm512_loadu_ps(row), _mm512_castsi512_ps(block[x])));
        }
      }
  }

  // One query block against the key block, its half of the waiting rows: S, P, dP, dS, and dQ
  // (which reads dS's key pairs before the next query block overwrites them).
  static void score_query_block(const TileBackwardJob& tile_job, const WaitingBlock& w,
                                int64_t half, int64_t first_key, int64_t keys,
                                const TileBackwardScratch& scratch) {
    load_row_stats(tile_job.grads, w.block, scratch);
    recompute_probabilities(tile_job, w.block, first_key, keys, w.partial, w.tile, w.packed.q_of_d,
                            scratch);
    score_gradients(tile_job, w.block, keys, w.partial, w.tile, w.packed.dout_of_d, half, scratch);
    accumulate_query_gradients(tile_job, w.block, keys, w.partial, w.tile, scratch);
  }

  // dV and dK over the waiting query blocks.
  static void accumulate_key_gradients(const TileBackwardJob& tile_job, const WaitingBlock* waiting,
                                       int64_t count, int64_t keys,
                                       const TileBackwardScratch& scratch) {
    const TileBackwardLayout& layout = tile_job.layout;
    accumulate_key_rows(scratch.p_rows, waiting, count, /*values=*/true, layout.dv_padded, keys,
                        scratch.dv);
    accumulate_key_rows(scratch.ds_rows, waiting, count, /*values=*/false, layout.dk_padded, keys,
                        scratch.dk);
  }

  static void key_block(const TileBackwardJob& tile_job, int64_t item,
                        const TileBackwardScratch& scratch) {
    const KeyBlockJob& job = tile_job.grads;
    const Shape& s = job.shape;
    const TileBackwardLayout& layout = tile_job.layout;
    const int64_t kv_index = item / layout.key_blocks;  // b * kv_heads + kv head
    const int64_t batch = kv_index / s.kv_heads;
    const int64_t kv_head = kv_index % s.kv_heads;
    // Odd heads walk their key blocks backwards, as the vector backward's (backward_key_block.h).
    const int64_t number = item % layout.key_blocks;
    const int64_t first_key =
        (kv_index % 2 == 0 ? number : layout.key_blocks - 1 - number) * kTileBackwardKeyBlock;
    const int64_t keys = std::min(kTileBackwardKeyBlock, s.seq_kv - first_key);
    load_key_block(tile_job, batch, kv_head, first_key, keys, scratch);
    const KeyRange rows = rows_seeing<Ops>(*job.mask, s.seq_q, first_key, first_key + keys);
    WaitingBlock waiting[kTileBackwardQueryPair];
    int64_t count = 0;
    for (int64_t g = 0; g < s.group_size(); ++g) {
      const int64_t head = kv_head * s.group_size() + g;
      for (int64_t query_block = rows.first / kQueryBlock; query_block * kQueryBlock < rows.last;
           ++query_block) {
        // locate_query_block numbers a head's query blocks from its last.
        const int64_t located =
            (batch * s.heads + head) * layout.query_blocks + layout.query_blocks - 1 - query_block;
        WaitingBlock& w = waiting[count];
        w.block = locate_query_block<Ops>(tile_job.queries, located);
        const Visibility visibility = classify_key_block<Ops>(w.block, first_key, keys, w.tile);
        if (visibility == Visibility::none) continue;
        w.partial = visibility == Visibility::partial;
        w.packed = PackedQueries::at(tile_job,
                                     (batch * s.heads + head) * layout.query_blocks + query_block);
        score_query_block(tile_job, w, count, first_key, keys, scratch);
        if (++count == kTileBackwardQueryPair) {
          accumulate_key_gradients(tile_job, waiting, count, keys, scratch);
          count = 0;
        }
      }
    }
    if (count > 0) accumulate_key_gradients(tile_job, waiting, count, keys, scratch);
    for (int64_t j = 0; j < keys; ++j) {
      std::copy_n(scratch.dk + j * layout.dk_padded, s.d_k,
                  job.dk.row<float>(batch, kv_head, first_key + j));
      std::copy_n(scratch.dv + j * layout.dv_padded, s.d_v,
                  job.dv.row<float>(batch, kv_head, first_key + j));
    }
  }
};

// The amx_bf16 path's entry points, forward and backward, on the tile layer `Tiles`.
template <class Ops, class Tiles>
TileKernels tile_path_kernels() {
  using Forward = TileForward<Ops, Tiles>;
  using Backward = TileBackward<Ops, Tiles>;
  return {&Forward::begin,       &Forward::end,          &Forward::pack,
          &Forward::query_group, &Forward::tile_product, &Backward::pack_queries,
          &Backward::key_block};
}

}  // namespace attnbench::flash_cpu
