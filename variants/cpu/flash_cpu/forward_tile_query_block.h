// flash_cpu's forward with both products on matrix tiles (TDPBF16PS, fp32 accumulators) and the
// online softmax between them on AVX-512: the amx_bf16 path, for bf16 inputs. Written once against
// the tile layer (harness/simd/tile_config.h) and compiled twice: on AMX (kernels_amx_bf16.cpp)
// and on the emulated tiles (kernels_amx_bf16_emulated.cpp), which run the same packing, tile
// walk, masks and softmax on any AVX512_BF16 CPU, so the path is tested where AMX is absent.
//
// Both products are taken transposed, so that every operand is a tile as packed (tile_blocks.h)
// and the scores come out key-major, as the vector paths' softmax (softmax.h) reads them:
//   Sᵀ = K Qᵀ     A = 16 keys x 32 d of packed K, B = 16 d pairs x 16 queries of the Q pairs,
//                 C = 16 keys x 16 queries of scores
//   Oᵀ += Vᵀ Pᵀ   A = 16 columns x 32 keys of packed Vᵀ, B = 16 key pairs x 16 queries of P
//                 rounded to bf16 pairs, C = 16 columns x 16 queries of the accumulator
// Each step is a 2 x 2 block of tiles (C in tiles 0-3, A in 4-5, B in 6-7): 4 products per 4
// loads. The key blocks (128 keys) are classified as on the vector paths: blocks no query of the
// block sees are skipped, blocks a mask edge cuts through are masked element by element, and
// within those, 32 x 32 blocks of tiles that no query sees are skipped in both products. Blocks
// every query sees whole take S and the softmax 32 keys at a time (fused_block), so that the
// scores go from the tile stores to the exponentials through L1, the tiles computing the next 32
// keys' scores while the vector units take this 32's softmax.
#pragma once

#if (!defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512BF16__)) && \
    !defined(ATTNBENCH_AVX512_EMULATED)
#error "forward_tile_query_block.h needs -mavx512f -mavx512bw -mavx512bf16 (or avx512_emulation.h)"
#endif

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "harness/core/element_types.h"
#include "harness/simd/exp2.h"
#include "harness/simd/tile_config.h"
#include "variants/cpu/flash_cpu/forward_query_block.h"
#include "variants/cpu/flash_cpu/tile_blocks.h"
#include "variants/cpu/flash_cpu/transpose_16x16.h"

namespace attnbench::flash_cpu {

template <class Ops, class Tiles>
struct TileForward {
  using V = typename Ops::V;
  static constexpr int64_t kPairStride = kQueryBlock * 4;  // bytes between rows of pairs/scores

  // Every tile 16 rows x 64 bytes, in both products.
  static void begin() {
    simd::TileConfig config;
    for (int t = 0; t < simd::kTiles; ++t) {
      config.rows[t] = simd::kTileMaxRows;
      config.bytes_per_row[t] = simd::kTileMaxBytes;
    }
    Tiles::configure(config);
  }
  static void end() { Tiles::release(); }

  // The 2 x 2 block's accumulators (tiles 0-3) cleared.
  static void zero_block() {
    Tiles::template zero<0>();
    Tiles::template zero<1>();
    Tiles::template zero<2>();
    Tiles::template zero<3>();
  }

  // The 2 x 2 block's accumulators (tiles 0-3) from, or to, 32 x 32 floats at `c`, rows
  // `row_floats` apart.
  static void load_block(const float* c, int64_t row_floats) {
    const int64_t stride = row_floats * 4;
    Tiles::template load<0>(c, stride);
    Tiles::template load<1>(c + kTileEdge, stride);
    Tiles::template load<2>(c + kTileEdge * row_floats, stride);
    Tiles::template load<3>(c + kTileEdge * row_floats + kTileEdge, stride);
  }
  static void store_block(float* c, int64_t row_floats) {
    const int64_t stride = row_floats * 4;
    Tiles::template store<0>(c, stride);
    Tiles::template store<1>(c + kTileEdge, stride);
    Tiles::template store<2>(c + kTileEdge * row_floats, stride);
    Tiles::template store<3>(c + kTileEdge * row_floats + kTileEdge, stride);
  }

  // One depth step of a 2 x 2 block: A's two tiles from `a_top` and `a_bottom` (`a_stride`
  // bytes a row), B's two from 16 columns of `pairs` apart (rows `pairs_stride` bytes apart), and
  // the four products into tiles 0-3.
  static void accumulate_block(const void* a_top, const void* a_bottom, int64_t a_stride,
                               const void* pairs, int64_t pairs_stride) {
    Tiles::template load<4>(a_top, a_stride);
    Tiles::template load<5>(a_bottom, a_stride);
    Tiles::template load<6>(pairs, pairs_stride);
    Tiles::template load<7>(static_cast<const char*>(pairs) + kTileEdge * 4, pairs_stride);
    Tiles::template dot_bf16<0, 4, 6>();
    Tiles::template dot_bf16<1, 4, 7>();
    Tiles::template dot_bf16<2, 5, 6>();
    Tiles::template dot_bf16<3, 5, 7>();
  }

  // `keys` rows of `d` bf16 values of `view` from `first_key`, `padded` apart, at `packed` (which
  // holds zeros past them): a tile's rows are keys.
  static void pack_rows(const TensorView& view, int64_t batch, int64_t head, int64_t first_key,
                        int64_t keys, int64_t d, int64_t padded, uint16_t* packed) {
    for (int64_t j = 0; j < keys; ++j)
      std::memcpy(packed + j * padded, view.row<const uint16_t>(batch, head, first_key + j), d * 2);
  }

  // The same rows transposed, [column][kKeyRow keys] (kKeyRow: the key block, the forward's or the
  // backward's): a tile's rows are columns. By blocks of 32 keys x 16 columns: each pair of keys
  // interleaved into 16 32-bit elements, the 16 pairs transposed (transpose_16x16.h), one 64-byte
  // row of the packing per column; the edges one value at a time.
  template <int64_t kKeyRow = kTileKeyBlock>
  static void pack_columns(const TensorView& view, int64_t batch, int64_t head, int64_t first_key,
                           int64_t keys, int64_t d, uint16_t* packed) {
    const int64_t whole_keys = keys / (2 * kTileEdge) * (2 * kTileEdge);
    const int64_t whole_columns = d / kTileEdge * kTileEdge;
    for (int64_t j = 0; j < whole_keys; j += 2 * kTileEdge)
      for (int64_t c = 0; c < whole_columns; c += kTileEdge) {
        __m512i pairs[kTileEdge];
        for (int64_t p = 0; p < kTileEdge; ++p) {
          const auto* even = view.row<const uint16_t>(batch, head, first_key + j + 2 * p) + c;
          const auto* odd = view.row<const uint16_t>(batch, head, first_key + j + 2 * p + 1) + c;
          pairs[p] = _mm512_or_si512(
              _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(even))),
              _mm512_slli_epi32(
                  _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(odd))),
                  16));
        }
        transpose_16x16<Ops>(pairs);
        for (int64_t x = 0; x < kTileEdge; ++x)
          _mm512_storeu_si512(packed + (c + x) * kKeyRow + j, pairs[x]);
      }
    for (int64_t j = 0; j < keys; ++j) {
      const uint16_t* row = view.row<const uint16_t>(batch, head, first_key + j);
      for (int64_t c = j < whole_keys ? whole_columns : 0; c < d; ++c)
        packed[c * kKeyRow + j] = row[c];
    }
  }

  // pairs[c][i] = (x[i][2c], x[i][2c + 1]) for `rows` rows of `view` from `first`, zero past d
  // and past the rows up to `columns`: the B operand whose rows are pairs of d (Q for the scores,
  // dO for the backward's dP). By blocks of 16 rows x 16 pairs, transposed as 32-bit elements;
  // the edges one value at a time.
  static void pack_pairs_of_d(const TensorView& view, int64_t batch, int64_t head, int64_t first,
                              int64_t rows, int64_t columns, int64_t d, int64_t d_padded,
                              uint32_t* pairs) {
    auto* halves = reinterpret_cast<uint16_t*>(pairs);  // [pair][query][2]
    const int64_t whole_rows = rows / kTileEdge * kTileEdge;
    const int64_t whole_pairs = d / (2 * kTileEdge) * kTileEdge;
    for (int64_t c = 0; c < d_padded / 2; ++c) {
      const int64_t from = c < whole_pairs ? whole_rows : 0;
      std::fill(pairs + c * kQueryBlock + from, pairs + c * kQueryBlock + columns, 0u);
    }
    for (int64_t i = 0; i < whole_rows; i += kTileEdge)
      for (int64_t c = 0; c < whole_pairs; c += kTileEdge) {
        __m512i block[kTileEdge];
        for (int64_t r = 0; r < kTileEdge; ++r)
          block[r] =
              _mm512_loadu_si512(view.row<const uint16_t>(batch, head, first + i + r) + 2 * c);
        transpose_16x16<Ops>(block);
        for (int64_t x = 0; x < kTileEdge; ++x)
          _mm512_storeu_si512(pairs + (c + x) * kQueryBlock + i, block[x]);
      }
    for (int64_t i = 0; i < rows; ++i) {
      const uint16_t* row = view.row<const uint16_t>(batch, head, first + i);
      for (int64_t c = i < whole_rows ? 2 * whole_pairs : 0; c < d; ++c)
        halves[((c / 2) * kQueryBlock + i) * 2 + c % 2] = row[c];
    }
  }

  // K as [key][dk_padded] and V transposed as [column][key], zero-padded (tile_blocks.h).
  static void pack(const TileJob& tile_job, int64_t item) {
    const Shape& s = tile_job.job.shape;
    const TileLayout& layout = tile_job.layout;
    const int64_t key_block = item % layout.key_blocks;
    const int64_t kv_head = item / layout.key_blocks % s.kv_heads;
    const int64_t batch = item / layout.key_blocks / s.kv_heads;
    uint16_t* k_packed = tile_job.packed + item * layout.packed_block;
    uint16_t* v_packed = k_packed + kTileKeyBlock * layout.dk_padded;
    const int64_t first_key = key_block * kTileKeyBlock;
    const int64_t keys = std::min(kTileKeyBlock, s.seq_kv - first_key);
    // Zeros where the keys or values stop short of whole tiles (the rest is overwritten).
    if (keys < kTileKeyBlock || s.d_k < layout.dk_padded || s.d_v < layout.dv_padded)
      std::fill(k_packed, k_packed + layout.packed_block, uint16_t{0});
    pack_rows(tile_job.job.tensors.k, batch, kv_head, first_key, keys, s.d_k, layout.dk_padded,
              k_packed);
    pack_columns(tile_job.job.tensors.v, batch, kv_head, first_key, keys, s.d_v, v_packed);
  }

  // The query block's Q in pairs of d, into the thread's scratch.
  static void pack_queries(const TileJob& tile_job, const QueryBlock& block,
                           const TileScratch& scratch) {
    pack_pairs_of_d(tile_job.job.tensors.q, block.batch, block.head, block.first_query, block.rows,
                    block.columns, tile_job.job.shape.d_k, tile_job.layout.dk_padded,
                    scratch.q_pairs);
  }

  // One 2 x 2 block of key_major_product: 32 rows of `a` (`depth` bf16 a row) by the 32 columns
  // from i of the pairs of d, into out[key][query] from column i.
  static void score_block(const uint16_t* a, int64_t depth, const uint32_t* pairs, int64_t i,
                          float* out) {
    zero_block();
    for (int64_t d = 0; d < depth; d += kTileDepth)
      accumulate_block(a + d, a + kTileEdge * depth + d, depth * 2,
                       pairs + (d / 2) * kQueryBlock + i, kPairStride);
    store_block(out + i, kQueryBlock);
  }

  // out[key][query] = A Bᵀ for `keys` rows of A (`depth` bf16 a row, padded to kTileDepth, zero
  // rows up to the next 32) and `columns` queries of B in pairs of d ([depth / 2][kQueryBlock]):
  // the scores (A = K, B = Q) and the backward's dP (A = V, B = dO). In a partial block, 32 x 32
  // blocks no query sees are skipped (left as they were).
  static void key_major_product(const uint16_t* a, int64_t depth, const uint32_t* pairs,
                                int64_t keys, int64_t columns, bool partial, const TileKeys& tile,
                                float* out) {
    for (int64_t j = 0; j < keys; j += 2 * kTileEdge) {
      for (int64_t i = 0; i < columns; i += 2 * kTileEdge) {
        if (partial && !tile.sees_any(i, i + 2 * kTileEdge, j, std::min(keys, j + 2 * kTileEdge)))
          continue;
        score_block(a + j * depth, depth, pairs, i, out + j * kQueryBlock);
      }
    }
  }

  // c[r][x] (32 x 32, rows `c_row_floats` apart) = (or, with `add_to_c`, +=) the sum over the
  // key block's keys j of a[r][j] B[j][i + x]: `a` is 32 rows of a [column][kKeyRow] packing (Vᵀ,
  // or the backward's Kᵀ), B the key pairs [key / 2][kQueryBlock] (P, or the backward's dS). Key
  // tiles no query of the 32 sees skipped.
  template <int64_t kKeyRow = kTileKeyBlock>
  static void transposed_block(const uint16_t* a, const uint32_t* key_pairs, int64_t keys,
                               int64_t i, bool partial, const TileKeys& tile, float* c,
                               int64_t c_row_floats, bool add_to_c) {
    constexpr int64_t kAStride = kKeyRow * 2;  // bytes between rows of `a`
    if (add_to_c) {
      load_block(c, c_row_floats);
    } else {
      zero_block();
    }
    for (int64_t j = 0; j < round_up(keys, kTileDepth); j += kTileDepth) {
      if (partial && !tile.sees_any(i, i + 2 * kTileEdge, j, std::min(keys, j + kTileDepth)))
        continue;
      accumulate_block(a + j, a + kTileEdge * kKeyRow + j, kAStride,
                       key_pairs + (j / 2) * kQueryBlock + i, kPairStride);
    }
    store_block(c, c_row_floats);
  }

  // Sᵀ for a partial or modified key block into scores[key][query], scaled into base 2, and each
  // column's max (stale rows of skipped tiles are masked later, and the max recomputed).
  static void compute_scores(const TileJob& tile_job, const QueryBlock& block,
                             const uint16_t* k_packed, int64_t keys, bool partial,
                             const TileKeys& tile, const TileScratch& scratch) {
    float* scores = scratch.vectors.scores;
    key_major_product(k_packed, tile_job.layout.dk_padded, scratch.q_pairs, keys, block.columns,
                      partial, tile, scores);
    const V scale = Ops::broadcast(tile_job.job.scale_log2);
    for (int64_t i = 0; i < block.columns; i += Ops::kWidth) {
      V column_max = Ops::broadcast(-std::numeric_limits<float>::infinity());
      for (int64_t j = 0; j < keys; ++j) {
        float* score = scores + j * kQueryBlock + i;
        const V scaled = Ops::mul(Ops::load(score), scale);
        Ops::store(score, scaled);
        column_max = Ops::max(column_max, scaled);
      }
      Ops::store(scratch.vectors.block_max + i, column_max);
    }
  }

  // Whether a key block takes fused_block: every query of the block sees every key, no modifier
  // changes the scores, and the scale is positive. Other blocks take the vector paths' steps
  // (compute_scores, normalise_scores, then pack_probabilities).
  static bool fused_softmax(const TileJob& tile_job, const QueryBlock& block, bool partial) {
    return !partial && !block.modified && tile_job.job.scale_log2 > 0.0f;
  }

  // How far (log2 units) a key block's max may pass a column's running max before the running max
  // moves: below it the probabilities reach at most 2^8, far inside fp32 and bf16, and alpha stays
  // exactly 1, so most blocks add into the accumulator without rescaling it.
  static constexpr float kMaxSlack = 8.0f;

  // 2^t for finite t (at most kMaxSlack here): t = n + f with n = floor(t) and f in [0, 1), 2^f
  // by a polynomial, 2^n applied by VSCALEFPS (which takes the floor of t itself); below 2^-149 it
  // gives 0, as exp2.h's does. f comes from one VREDUCEPS where the build has AVX512DQ (VRNDSCALEPS
  // and a subtraction where not: the same f, exactly, in one instruction instead of two). The
  // polynomials are exp2.h's (and a degree-3 one), fitted for relative error on |u| <= 1/2, taken
  // at u = f - 1/2 and multiplied by sqrt(2), expanded in f: the same relative errors, 1.0e-4 and
  // 2.0e-7. Degree 3 (7 operations with the scaling) where only the forward's O reads P: P is
  // rounded to bf16 (2^-9) straight after. Degree 5 where the backward follows: it recomputes P
  // from the log-sum-exp these sums give, and with one dominant key its dS is a small difference
  // that an error of 1e-4 in L shows through.
  static constexpr float kP3C3 = 7.779452950e-2f, kP3C2 = 2.258462459e-1f, kP3C1 = 6.962579489e-1f,
                         kP3C0 = 9.998987317e-1f;
  static constexpr float kP5C5 = 1.869402477e-3f, kP5C4 = 9.004340507e-3f, kP5C3 = 5.581929535e-2f,
                         kP5C2 = 2.401535362e-1f, kP5C1 = 6.931533217e-1f, kP5C0 = 9.999998808e-1f;
  template <bool kForBackward>
  static __m512 exp2_finite(__m512 t) {
    constexpr int kFloor = _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC;
#if defined(__AVX512DQ__)
    const __m512 f = _mm512_reduce_ps(t, kFloor);
#else
    const __m512 f = _mm512_sub_ps(t, _mm512_roundscale_ps(t, kFloor));
#endif
    __m512 p;
    if constexpr (kForBackward) {
      p = _mm512_fmadd_ps(_mm512_set1_ps(kP5C5), f, _mm512_set1_ps(kP5C4));
      p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kP5C3));
      p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kP5C2));
      p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kP5C1));
      p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kP5C0));
    } else {
      p = _mm512_fmadd_ps(_mm512_set1_ps(kP3C3), f, _mm512_set1_ps(kP3C2));
      p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kP3C1));
      p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kP3C0));
    }
    return _mm512_scalef_ps(p, t);
  }

  // The max of `keys` rows of one vector of columns (rows kQueryBlock apart), in four chains: one
  // chain would wait on VMAXPS's latency at every row.
  static V column_max(const float* column, int64_t keys) {
    V max[4];
    for (V& m : max) m = Ops::broadcast(-std::numeric_limits<float>::infinity());
    int64_t j = 0;
    for (; j + 4 <= keys; j += 4)
      for (int k = 0; k < 4; ++k)
        max[k] = Ops::max(max[k], Ops::load(column + (j + k) * kQueryBlock));
    for (; j < keys; ++j) max[0] = Ops::max(max[0], Ops::load(column + j * kQueryBlock));
    return Ops::max(Ops::max(max[0], max[1]), Ops::max(max[2], max[3]));
  }

  // A fused block's keys are taken 32 at a time (one row of 2 x 2 tile blocks): their scores go
  // to a panel of 32 x kQueryBlock floats that stays in L1 from the tile stores to the softmax,
  // where the whole block's scores (48 KiB) would not; P's pairs go to the first kTileKeyBlock / 2
  // rows of the scores, the two panels (one being written, one being read) sit past them.
  static constexpr int64_t kPanelKeys = 2 * kTileEdge;
  static_assert(kTileKeyBlock / 2 + 2 * kPanelKeys <= kTileKeyBlock, "the panels fit past P");
  static float* panel(const Scratch& scratch, int64_t which) {
    return scratch.scores + (kTileKeyBlock / 2 + which * kPanelKeys) * kQueryBlock;
  }

  // Sᵀ, the online softmax and P's bf16 pairs for a fused block, a panel at a time. The tiles
  // compute the next panel's scores while the vector units take the softmax of this one: each
  // 2 x 2 block of the next panel is issued just before the softmax of 32 columns of this one, so
  // that the core runs the two side by side (they share no data), where a panel's whole product
  // and then its whole softmax would leave the tiles idle through the one and the vector units
  // through the other. Each panel moves a column's running max only where its own max passes it
  // by more than kMaxSlack; where one does, after the block's first panel, the pairs already
  // written for that column are rescaled to the new max (rare: the slack keeps most blocks' max
  // where it was). At the end, alpha (the accumulator's rescale) is 2^(max before the block - max
  // after it).
  template <bool kForBackward>
  static void fused_block(const TileJob& tile_job, const QueryBlock& block,
                          const uint16_t* k_packed, int64_t keys, float headroom_log2,
                          const TileScratch& scratch) {
    const Scratch& vectors = scratch.vectors;
    const int64_t dk_padded = tile_job.layout.dk_padded;
    const float scale_log2 = tile_job.job.scale_log2;
    // block_max holds the max before the block (the vector paths' use of it, the block's own
    // max, has no reader on this path) until alpha is taken from it below.
    std::copy(vectors.row_max, vectors.row_max + block.columns, vectors.block_max);
    for (int64_t i = 0; i < block.columns; i += 2 * kTileEdge)
      score_block(k_packed, dk_padded, scratch.q_pairs, i, panel(vectors, 0));
    for (int64_t first = 0; first < keys; first += kPanelKeys) {
      const int64_t panel_keys = std::min(kPanelKeys, keys - first);
      const int64_t next = first + kPanelKeys;
      const float* scores = panel(vectors, first / kPanelKeys % 2);
      float* next_scores = panel(vectors, next / kPanelKeys % 2);
      for (int64_t i = 0; i < block.columns; i += 2 * kTileEdge) {
        if (next < keys)
          score_block(k_packed + next * dk_padded, dk_padded, scratch.q_pairs, i, next_scores);
        softmax_panel<kForBackward>(scale_log2, headroom_log2, scores, first, panel_keys, i,
                                    std::min(block.columns, i + 2 * kTileEdge), vectors);
      }
    }
    for (int64_t i = 0; i < block.columns; i += Ops::kWidth) {
      const V shift = Ops::zero_if_minus_infinity(Ops::load(vectors.row_max + i));
      Ops::store(vectors.alpha + i, Ops::exp2(Ops::sub(Ops::load(vectors.block_max + i), shift)));
    }
    const int64_t used = (keys + 1) / 2;
    const int64_t tiled = round_up(keys, kTileDepth) / 2;
    auto* pairs = reinterpret_cast<uint32_t*>(vectors.scores);
    for (int64_t r = used; r < tiled; ++r)
      std::fill(pairs + r * kQueryBlock, pairs + r * kQueryBlock + block.columns, 0u);
  }

  // Columns [column_begin, column_end) of a panel's `keys` scores (`scores`: the keys `first`..)
  // in the online softmax: p = exp2(score * scale - max), rounded to pairs of keys at pair rows
  // first / 2.., and summed. A column vector whose running max is finite first tries that max as
  // it is, with no pass for the panel's own: the max need not move if no p passes 2^kMaxSlack,
  // and a sum of p at most that says none does. Past it (or with no max yet), the panel's max is
  // taken and the exponentials are taken again against it. Each p is scaled by 2^-headroom_log2
  // (the query group's overflow pass, softmax_block's reason), and so is the bound on their sum.
  template <bool kForBackward>
  static void softmax_panel(float scale_log2, float headroom_log2, const float* scores,
                            int64_t first, int64_t keys, int64_t column_begin, int64_t column_end,
                            const Scratch& scratch) {
    const V scale = Ops::broadcast(scale_log2);
    const V slack = Ops::broadcast(kMaxSlack);
    const V most_kept =
        Ops::broadcast(std::ldexp(1.0f, static_cast<int>(kMaxSlack - headroom_log2)));
    uint32_t* pairs = reinterpret_cast<uint32_t*>(scratch.scores) + first / 2 * kQueryBlock;
    for (int64_t i = column_begin; i < column_end; i += Ops::kWidth) {
      const V old_max = Ops::load(scratch.row_max + i);
      const V row_sum = Ops::load(scratch.row_sum + i);
      const V minus_infinity = Ops::broadcast(-std::numeric_limits<float>::infinity());
      const bool max_known = _mm512_cmp_ps_mask(old_max, minus_infinity, _CMP_NEQ_UQ) ==
                             static_cast<__mmask16>(0xFFFF);
      if (max_known) {
        const V sum =
            exponentials<kForBackward>(scores + i, keys, scale, old_max, headroom_log2, pairs + i);
        // NaN (a NaN score) takes the path below too, as it did before this shortcut.
        if (_mm512_cmp_ps_mask(sum, most_kept, _CMP_NLE_UQ) == 0) {
          Ops::store(scratch.row_sum + i, Ops::add(row_sum, sum));
          continue;
        }
      }
      // The scale is positive: the largest raw score, scaled, is the largest scaled score.
      const V panel_max = Ops::mul(column_max(scores + i, keys), scale);
      const __mmask16 grows = _mm512_cmp_ps_mask(panel_max, Ops::add(old_max, slack), _CMP_GT_OQ);
      const V new_max = _mm512_mask_mov_ps(old_max, grows, panel_max);
      // As in softmax_block: a column whose max is still -inf subtracts 0, not -inf.
      const V shift = Ops::zero_if_minus_infinity(new_max);
      const V sum =
          exponentials<kForBackward>(scores + i, keys, scale, shift, headroom_log2, pairs + i);
      Ops::store(scratch.row_max + i, new_max);
      if (grows == 0) {
        Ops::store(scratch.row_sum + i, Ops::add(row_sum, sum));
        continue;
      }
      const V alpha = Ops::exp2(Ops::sub(old_max, shift));
      Ops::store(scratch.row_sum + i, Ops::fmadd(row_sum, alpha, sum));
      rescale_pairs(reinterpret_cast<uint32_t*>(scratch.scores) + i, first / 2, alpha);
    }
  }

  // Below this |shift|, panel_exponentials takes score * scale - shift as one fused multiply-add:
  // the max score's exponent is then its product's rounding error rather than 0, at most 2^-8
  // here, under bf16's rounding of P. Past it the error grows with the scores (over 128 once
  // they pass 2^31: exp2 of it overflows, or the row loses its largest weight), and the product
  // is rounded first, as the max was: one more instruction per 16 scores, for scores no trained
  // model's attention reaches.
  static constexpr float kFusedShiftLimit = 65536.0f;

  // panel_exponentials with a fused or a rounded product (kFusedShiftLimit), for one vector of
  // columns shifted by `shift` (finite: a column's max, or 0), scaled by 2^-headroom_log2 where
  // that is not 0 (a pass run again after an overflow).
  template <bool kForBackward>
  static V exponentials(const float* scores, int64_t keys, V scale, V shift, float headroom_log2,
                        uint32_t* pairs) {
    const V minus_shift = Ops::sub(Ops::zero(), shift);
    const bool small = _mm512_cmp_ps_mask(Ops::abs(shift), Ops::broadcast(kFusedShiftLimit),
                                          _CMP_LT_OQ) == static_cast<__mmask16>(0xFFFF);
    if (headroom_log2 != 0) {
      const V factor = Ops::broadcast(std::ldexp(1.0f, -static_cast<int>(headroom_log2)));
      if (small)
        return panel_exponentials<kForBackward, true, true>(scores, keys, scale, minus_shift,
                                                            factor, pairs);
      return panel_exponentials<kForBackward, false, true>(scores, keys, scale, minus_shift, factor,
                                                           pairs);
    }
    const V one = Ops::broadcast(1.0f);
    if (small)
      return panel_exponentials<kForBackward, true, false>(scores, keys, scale, minus_shift, one,
                                                           pairs);
    return panel_exponentials<kForBackward, false, false>(scores, keys, scale, minus_shift, one,
                                                          pairs);
  }

  // One vector of columns of a panel's `keys` scores (rows kQueryBlock apart) as p = exp2(score *
  // scale + minus_shift), rounded to pairs of keys at `pairs` (rows kQueryBlock apart), and their
  // sum: the product fused with the shift (kFused), or rounded first (kFusedShiftLimit; an
  // explicitly rounded product, since the compiler contracts a plain multiply and add). The sum
  // adds P as rounded for the products (bf16 pairs times pairs of 1.0, in fp32), so that O = sum P
  // V / sum P weighs V by weights that sum to one: a row one key dominates gets that key's V as it
  // is, whatever its P rounded to. Inlined, so that a whole panel's loop has a constant trip count.
  // kScaled: each p times `factor` (2^-headroom_log2) before it is rounded.
  template <bool kForBackward, bool kFused, bool kScaled>
  __attribute__((always_inline)) static V panel_exponentials(const float* scores, int64_t keys,
                                                             V scale, V minus_shift, V factor,
                                                             uint32_t* pairs) {
    const __m512bh ones = reinterpret_cast<__m512bh>(_mm512_set1_epi32(0x3F803F80));
    const auto unscaled = [&](int64_t j) {
      const V score = Ops::load(scores + j * kQueryBlock);
      if constexpr (kFused) return exp2_finite<kForBackward>(Ops::fmadd(score, scale, minus_shift));
      return exp2_finite<kForBackward>(
          Ops::add(_mm512_mul_round_ps(score, scale, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                   minus_shift));
    };
    const auto exponential = [&](int64_t j) {
      if constexpr (kScaled) return Ops::mul(unscaled(j), factor);
      return unscaled(j);
    };
    const auto pair_of_keys = [&](int64_t j, V& sum) {
      const __m512i rounded =
          to_pairs(exponential(j), j + 1 < keys ? exponential(j + 1) : Ops::zero());
      _mm512_storeu_si512(pairs + (j / 2) * kQueryBlock, rounded);
      sum = _mm512_dpbf16_ps(sum, reinterpret_cast<__m512bh>(rounded), ones);
    };
    // Two sums, so that each VDPBF16PS waits on the one before last.
    V sums[2] = {Ops::zero(), Ops::zero()};
    if (keys == kPanelKeys) {
      for (int64_t j = 0; j < kPanelKeys; j += 4) {
        pair_of_keys(j, sums[0]);
        pair_of_keys(j + 2, sums[1]);
      }
    } else {
      for (int64_t j = 0; j < keys; j += 2) pair_of_keys(j, sums[0]);
    }
    return Ops::add(sums[0], sums[1]);
  }

  // Two rows of probabilities rounded to bf16 (nearest even) and interleaved into key pairs.
  static __m512i to_pairs(__m512 even, __m512 odd) {
    const __m512i order =
        _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i both = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(odd, even));
    return _mm512_permutexvar_epi16(order, both);
  }

  // `rows` pair rows of one vector of columns (rows kQueryBlock apart) times alpha, rounded again.
  static void rescale_pairs(uint32_t* pairs, int64_t rows, __m512 alpha) {
    const __m512i high_half = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    for (int64_t r = 0; r < rows; ++r) {
      const __m512i both = _mm512_loadu_si512(pairs + r * kQueryBlock);
      const __m512 even = _mm512_castsi512_ps(_mm512_slli_epi32(both, 16));
      const __m512 odd = _mm512_castsi512_ps(_mm512_and_si512(both, high_half));
      _mm512_storeu_si512(pairs + r * kQueryBlock,
                          to_pairs(_mm512_mul_ps(even, alpha), _mm512_mul_ps(odd, alpha)));
    }
  }

  // The probabilities rounded to bf16 pairs of keys, in place (pair row r over score row r, after
  // rows 2r and 2r + 1 were read), and zero pair rows up to the next whole tile of keys.
  static void pack_probabilities(int64_t keys, int64_t columns, float* scores) {
    auto* pairs = reinterpret_cast<uint32_t*>(scores);
    for (int64_t j = 0; j < keys; j += 2)
      for (int64_t i = 0; i < columns; i += 16) {
        const __m512 even = _mm512_loadu_ps(scores + j * kQueryBlock + i);
        const __m512 odd = j + 1 < keys ? _mm512_loadu_ps(scores + (j + 1) * kQueryBlock + i)
                                        : _mm512_setzero_ps();
        _mm512_storeu_si512(pairs + (j / 2) * kQueryBlock + i, to_pairs(even, odd));
      }
    const int64_t used = (keys + 1) / 2;
    const int64_t tiled = round_up(keys, kTileDepth) / 2;
    for (int64_t r = used; r < tiled; ++r)
      std::fill(pairs + r * kQueryBlock, pairs + r * kQueryBlock + columns, 0u);
  }

  // Oᵀ = alpha Oᵀ + Vᵀ Pᵀ over the key block: the accumulator's columns rescaled only where a
  // max moved (alpha != 1), then the products added to it in place on the tiles.
  static void accumulate_values(const TileJob& tile_job, const QueryBlock& block,
                                const uint16_t* v_packed, int64_t keys, bool partial,
                                const TileKeys& tile, const TileScratch& scratch) {
    const int64_t dv_padded = tile_job.layout.dv_padded;
    const auto* p_pairs = reinterpret_cast<const uint32_t*>(scratch.vectors.scores);
    const V one = Ops::broadcast(1.0f);
    for (int64_t i = 0; i < block.columns; i += 2 * kTileEdge) {
      const V alpha_low = Ops::load(scratch.vectors.alpha + i);
      const V alpha_high = Ops::load(scratch.vectors.alpha + i + kTileEdge);
      const bool rescale = (_mm512_cmp_ps_mask(alpha_low, one, _CMP_NEQ_UQ) |
                            _mm512_cmp_ps_mask(alpha_high, one, _CMP_NEQ_UQ)) != 0;
      for (int64_t c = 0; c < dv_padded && rescale; ++c) {
        float* o = scratch.out_t + c * kQueryBlock + i;
        Ops::store(o, Ops::mul(alpha_low, Ops::load(o)));
        Ops::store(o + kTileEdge, Ops::mul(alpha_high, Ops::load(o + kTileEdge)));
      }
    }
    // 32 columns of Vᵀ (8 KiB at 128 keys) at a time over every query: each comes from L2 once
    // and serves the block's query tiles from L1, beside P (24 KiB), which all of them read.
    for (int64_t c = 0; c < dv_padded; c += 2 * kTileEdge)
      for (int64_t i = 0; i < block.columns; i += 2 * kTileEdge)
        transposed_block(v_packed + c * kTileKeyBlock, p_pairs, keys, i, partial, tile,
                         scratch.out_t + c * kQueryBlock + i, kQueryBlock, /*add_to_c=*/true);
  }

  // O = Oᵀ transposed back / row sum, rounded to bf16 (and L, when the backward follows). By blocks
  // of 16 columns x 16 rows (transpose_16x16.h); the edges one value at a time.
  static void store_output(const TileJob& tile_job, const QueryBlock& block, float headroom_log2,
                           const TileScratch& scratch) {
    const Shape& s = tile_job.job.shape;
    store_log_sum_exp<Ops>(tile_job.job, block, headroom_log2, scratch.vectors);
    const TensorView& o = tile_job.job.tensors.o;
    const int64_t whole_rows = block.rows / kTileEdge * kTileEdge;
    const int64_t whole_columns = s.d_v / kTileEdge * kTileEdge;
    for (int64_t i = 0; i < whole_rows; i += kTileEdge)
      for (int64_t c = 0; c < whole_columns; c += kTileEdge) {
        __m512i rows[kTileEdge];
        for (int64_t x = 0; x < kTileEdge; ++x)
          rows[x] = _mm512_loadu_si512(scratch.out_t + (c + x) * kQueryBlock + i);
        transpose_16x16<Ops>(rows);
        for (int64_t r = 0; r < kTileEdge; ++r) {
          const __m512 row = _mm512_div_ps(_mm512_castsi512_ps(rows[r]),
                                           _mm512_set1_ps(scratch.vectors.row_sum[i + r]));
          _mm256_storeu_si256(
              reinterpret_cast<__m256i*>(
                  o.row<uint16_t>(block.batch, block.head, block.first_query + i + r) + c),
              reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(row)));
        }
      }
    float* row = scratch.staging;  // d_v <= kTileMaxD floats fit in the staging block
    for (int64_t i = 0; i < block.rows; ++i) {
      const int64_t from = i < whole_rows ? whole_columns : 0;
      if (from == s.d_v) continue;
      for (int64_t c = from; c < s.d_v; ++c)
        row[c] = scratch.out_t[c * kQueryBlock + i] / scratch.vectors.row_sum[i];
      narrow_from_fp32(s.dtype, row + from,
                       o.row<uint16_t>(block.batch, block.head, block.first_query + i) + from,
                       s.d_v - from);
    }
  }

  // The query blocks of group `item` over the union of the keys they see, key block by key block:
  // each block's K and V serve every query block of the group while they are in L1 or L2.
  static void query_group(const TileJob& tile_job, int64_t item, const TileGroupScratch& scratch) {
    const Job& job = tile_job.job;
    const int64_t head_index = item / tile_job.groups_per_head();  // b * heads + h
    const int64_t first_member = item % tile_job.groups_per_head() * tile_job.group;
    const int64_t members = std::min(tile_job.group, job.query_blocks - first_member);
    QueryBlock blocks[kTileQueryGroup];
    KeyRange keys{std::numeric_limits<int64_t>::max(), 0};
    for (int64_t m = 0; m < members; ++m) {
      // Numbered as Job's: the group's blocks in the order locate_query_block walks them.
      blocks[m] = locate_query_block<Ops>(job, head_index * job.query_blocks + first_member + m);
      keys.first = std::min(keys.first, blocks[m].hull.first);
      keys.last = std::max(keys.last, blocks[m].hull.last);
    }
    float headroom_log2 = 0;
    accumulate_group(tile_job, blocks, members, keys, headroom_log2, scratch);
    // A group whose O accumulators passed float's range is computed again with P scaled down, as
    // attend_query_block does.
    bool finite = true;
    for (int64_t m = 0; m < members; ++m)
      finite &=
          rows_finite<Ops>(scratch.member[m].out_t, job.shape.d_v, blocks[m].rows, kQueryBlock);
    if (!finite) {
      headroom_log2 = kOverflowHeadroomLog2;
      accumulate_group(tile_job, blocks, members, keys, headroom_log2, scratch);
    }
    for (int64_t m = 0; m < members; ++m)
      store_output(tile_job, blocks[m], headroom_log2, scratch.member[m]);
  }

  // The group's unnormalised O accumulators from scratch over its keys, P scaled by
  // 2^-headroom_log2.
  static void accumulate_group(const TileJob& tile_job, const QueryBlock* blocks, int64_t members,
                               KeyRange keys, float headroom_log2,
                               const TileGroupScratch& scratch) {
    for (int64_t m = 0; m < members; ++m) start_query_block(tile_job, blocks[m], scratch.member[m]);
    for (int64_t key_block = keys.first / kTileKeyBlock; key_block * kTileKeyBlock < keys.last;
         ++key_block)
      for (int64_t m = 0; m < members; ++m)
        attend_key_block(tile_job, blocks[m], key_block, headroom_log2, scratch.member[m]);
  }

  // The query block's Q packed, its O and stats started over.
  static void start_query_block(const TileJob& tile_job, const QueryBlock& block,
                                const TileScratch& scratch) {
    pack_queries(tile_job, block, scratch);
    // The tiles work on 32 columns at a time: past the block's columns, zeros and alpha 1.
    const int64_t tiled_columns = round_up(block.columns, 2 * kTileEdge);
    for (int64_t c = 0; c < tile_job.layout.dv_padded; ++c)
      std::fill(scratch.out_t + c * kQueryBlock, scratch.out_t + c * kQueryBlock + tiled_columns,
                0.0f);
    std::fill(scratch.vectors.alpha, scratch.vectors.alpha + tiled_columns, 1.0f);
    std::fill(scratch.vectors.row_max, scratch.vectors.row_max + block.columns,
              -std::numeric_limits<float>::infinity());
    std::fill(scratch.vectors.row_sum, scratch.vectors.row_sum + block.columns, 0.0f);
  }

  // One key block for one query block: skipped where no query sees it, fused where every query
  // sees all of it, masked element by element otherwise; then its P V into the accumulator.
  static void attend_key_block(const TileJob& tile_job, const QueryBlock& block, int64_t key_block,
                               float headroom_log2, const TileScratch& scratch) {
    const Job& job = tile_job.job;
    const TileLayout& layout = tile_job.layout;
    const int64_t first_key = key_block * kTileKeyBlock;
    if (block.hull.first >= block.hull.last || first_key >= block.hull.last ||
        first_key + kTileKeyBlock <= block.hull.first)
      return;
    const int64_t keys = std::min(kTileKeyBlock, job.shape.seq_kv - first_key);
    TileKeys tile;
    const Visibility visibility = classify_key_block<Ops>(block, first_key, keys, tile);
    if (visibility == Visibility::none) return;
    const bool partial = visibility == Visibility::partial;
    const uint16_t* k_packed =
        tile_job.packed +
        ((block.batch * job.shape.kv_heads + block.kv_head) * layout.key_blocks + key_block) *
            layout.packed_block;
    const uint16_t* v_packed = k_packed + kTileKeyBlock * layout.dk_padded;
    if (fused_softmax(tile_job, block, partial)) {
      if (job.lse != nullptr) {
        fused_block<true>(tile_job, block, k_packed, keys, headroom_log2, scratch);
      } else {
        fused_block<false>(tile_job, block, k_packed, keys, headroom_log2, scratch);
      }
    } else {
      compute_scores(tile_job, block, k_packed, keys, partial, tile, scratch);
      normalise_scores<Ops>(job, block, first_key, keys, partial, tile, headroom_log2,
                            scratch.vectors);
      pack_probabilities(keys, block.columns, scratch.vectors.scores);
    }
    accumulate_values(tile_job, block, v_packed, keys, partial, tile, scratch);
  }

  // c[16][16] += a[16][32] b[16][16 pairs], rows 64 bytes apart.
  static void tile_product(const uint16_t* a, const uint16_t* b, float* c) {
    begin();
    Tiles::template load<0>(c, 64);
    Tiles::template load<4>(a, 64);
    Tiles::template load<6>(b, 64);
    Tiles::template dot_bf16<0, 4, 6>();
    Tiles::template store<0>(c, 64);
    end();
  }
};

}  // namespace attnbench::flash_cpu
