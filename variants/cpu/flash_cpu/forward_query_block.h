// flash_cpu's forward driver: one block of up to 96 query rows of one (batch, head) over all its
// visible keys, in blocks of 48, written once against a SIMD path and compiled per path in
// kernels_<isa>.cpp. The stages, in the order a block runs them:
//   load_queries        Qᵀ of the block, pre-scaled into base 2 (or bf16 pairs), O and stats zeroed
//   classify_key_block  which keys of a key block each query sees: none, all, or cut by a mask
//   compute_scores      S = Q Kᵀ for the tile (sub-tiles no query sees skipped)
//   normalise_scores    modifiers, mask, online softmax (softmax.h)
//   accumulate_values   O = alpha O + P V, each group of rows over the keys it sees
//   store_output        O / row sum, rounded to the dtype (and each row's log-sum-exp, L, when
//                       the backward follows)
// Masks cost what they leave visible, as FlexAttention's block masks do: only key blocks inside
// the hull of the rows' visible keys are visited, fully masked ones are skipped, and only blocks
// a mask edge cuts through are masked element by element; fully visible blocks run exactly the
// unmasked code. Memory: the thread's Scratch only, O(d) per thread.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "harness/core/element_types.h"
#include "variants/cpu/flash_cpu/micro_kernels.h"
#include "variants/cpu/flash_cpu/output_overflow.h"
#include "variants/cpu/flash_cpu/softmax.h"

namespace attnbench::flash_cpu {

// The path without vdpbf16ps products: every dtype is widened to fp32 for the FMA kernels.
struct NoBf16Dot {
  static constexpr bool kEnabled = false;
};

// Where one query block sits and how its tensors are read.
struct QueryBlock {
  int64_t batch, head, kv_head;
  int64_t first_query, rows, columns;  // columns: rows rounded up to whole strips
  bool direct_k, direct_v;             // fp32 K / V read in place rather than packed
  bool bf16_dot;
  bool modified;           // soft-capping or ALiBi change the scores
  float alibi_slope_log2;  // the head's ALiBi slope in base 2, or 0
  int64_t dv_vectors;
  // The keys each row sees (columns past the last row repeat its range), the hull of them all and
  // the keys every row sees (empty where there are none).
  int64_t row_first[kQueryBlock];
  int64_t row_last[kQueryBlock];
  KeyRange hull;
  KeyRange common;
};

// count elements of a row in `dtype` at `source`, widened to fp32 at `destination`.
template <class Ops>
void widen_row(DType dtype, const void* source, float* destination, int64_t count) {
  switch (dtype) {
    case DType::fp32: std::copy_n(static_cast<const float*>(source), count, destination); break;
    case DType::bf16: {
      const auto* bits = static_cast<const uint16_t*>(source);
      for (int64_t i = 0; i < count; ++i) destination[i] = from_bf16_bits(bits[i]);
      break;
    }
    case DType::fp16:
      Ops::widen_fp16(static_cast<const uint16_t*>(source), destination, count);
      break;
  }
}

template <class Ops>
QueryBlock locate_query_block(const Job& job, int64_t item) {
  const Shape& s = job.shape;
  QueryBlock block;
  const int64_t head_index = item / job.query_blocks;  // b * heads + h
  // Last query block first: under a causal mask it is the most expensive.
  const int64_t query_block = job.query_blocks - 1 - item % job.query_blocks;
  block.first_query = query_block * kQueryBlock;
  block.rows = std::min(kQueryBlock, s.seq_q - block.first_query);
  block.columns = round_up(block.rows, TileShape<Ops>::kStrip);
  block.batch = head_index / s.heads;
  block.head = head_index % s.heads;
  block.kv_head = block.head / s.group_size();
  // fp32 with K rows d_k apart is read in place; any other dtype or layout is packed per block.
  block.direct_k = s.dtype == DType::fp32 && job.tensors.k.row_stride == s.d_k;
  block.direct_v = s.dtype == DType::fp32 && s.d_v % Ops::kWidth == 0;
  block.bf16_dot = job.bf16_dot;
  block.modified = job.softcap_log2 > 0 || s.alibi;
  block.alibi_slope_log2 =
      s.alibi ? static_cast<float>(alibi_slope(block.head, s.heads)) * kLog2e : 0.0f;
  block.dv_vectors = (s.d_v + Ops::kWidth - 1) / Ops::kWidth;
  const MaskGeometry& mask = *job.mask;
  block.common = {0, std::numeric_limits<int64_t>::max()};
  for (int64_t i = 0; i < block.columns; ++i) {
    const KeyRange range = mask.keys(block.first_query + std::min(i, block.rows - 1));
    block.row_first[i] = range.first;
    block.row_last[i] = range.last;
    block.common.first = std::max(block.common.first, range.first);
    block.common.last = std::min(block.common.last, range.last);
  }
  block.hull = mask.keys_of_rows(block.first_query, block.first_query + block.rows);
  return block;
}

// Qᵀ, pre-scaled into base 2; padding columns are zero (their scores are 0, never written).
// fp32 rows are read in place, the other dtypes widened first. Then O and the stats start over.
template <class Ops, class Bf16Path>
void load_queries(const Job& job, const QueryBlock& block, const Scratch& scratch) {
  const Shape& s = job.shape;
  const TensorView& q_view = job.tensors.q;
  if constexpr (Bf16Path::kEnabled) {
    if (block.bf16_dot)
      Bf16Path::pack_query_pairs(q_view, block.batch, block.head, block.first_query, block.rows,
                                 block.columns, s.d_k / 2,
                                 reinterpret_cast<typename Bf16Path::Pairs*>(scratch.q_t));
  }
  if (!block.bf16_dot) {
    for (int64_t i = 0; i < block.rows; ++i) {
      const float* q_row = scratch.k_packed;
      if (s.dtype == DType::fp32) {
        q_row = q_view.row<const float>(block.batch, block.head, block.first_query + i);
      } else {
        widen_row<Ops>(s.dtype, q_view.address(block.batch, block.head, block.first_query + i),
                       scratch.k_packed, s.d_k);
      }
      for (int64_t c = 0; c < s.d_k; ++c)
        scratch.q_t[c * kQueryBlock + i] = q_row[c] * job.scale_log2;
    }
    for (int64_t c = 0; c < s.d_k; ++c)
      std::fill(scratch.q_t + c * kQueryBlock + block.rows,
                scratch.q_t + c * kQueryBlock + block.columns, 0.0f);
  }
  for (int64_t i = 0; i < block.rows; ++i)
    std::fill(scratch.out + i * job.dv_stride,
              scratch.out + i * job.dv_stride + block.dv_vectors * Ops::kWidth, 0.0f);
  std::fill(scratch.row_max, scratch.row_max + block.columns,
            -std::numeric_limits<float>::infinity());
  std::fill(scratch.row_sum, scratch.row_sum + block.columns, 0.0f);
}

enum class Visibility { none, partial, full };

// The key block's visibility from the rows' ranges (mask.h's classify, without asking the mask
// again for every row of every block), and each column's visible keys in `tile`. A block inside
// the keys every row sees (every block of an unmasked case) is full without a look at each row.
template <class Ops>
Visibility classify_key_block(const QueryBlock& block, int64_t first_key, int64_t keys,
                              TileKeys& tile) {
  if (first_key >= block.common.first && first_key + keys <= block.common.last) {
    std::fill(tile.lo, tile.lo + block.columns, 0);
    std::fill(tile.hi, tile.hi + block.columns, static_cast<int32_t>(keys));
    return Visibility::full;
  }
  bool any_visible = false;
  bool all_visible = true;
  for (int64_t i = 0; i < block.columns; ++i) {
    tile.lo[i] = static_cast<int32_t>(std::clamp<int64_t>(block.row_first[i] - first_key, 0, keys));
    tile.hi[i] = static_cast<int32_t>(std::clamp<int64_t>(block.row_last[i] - first_key, 0, keys));
    any_visible |= tile.lo[i] < tile.hi[i];
    all_visible &= tile.lo[i] == 0 && tile.hi[i] == keys;
  }
  if (!any_visible) return Visibility::none;
  return all_visible ? Visibility::full : Visibility::partial;
}

// S = Q Kᵀ for the tile, key-major: scores[j][i]. In a partial block, sub-tiles of kRows keys x
// one strip of queries that no column sees are skipped (a block the mask cuts through still has
// whole sub-tiles behind it: a sliding window's band).
template <class Ops, class Bf16Path>
void compute_scores(const Job& job, const QueryBlock& block, int64_t first_key, int64_t keys,
                    bool partial, const TileKeys& tile, const Scratch& scratch) {
  constexpr int kRows = TileShape<Ops>::kRows;
  constexpr int64_t kStrip = TileShape<Ops>::kStrip;
  const Shape& s = job.shape;
  const TensorView& k_view = job.tensors.k;
  std::fill(scratch.block_max, scratch.block_max + block.columns,
            -std::numeric_limits<float>::infinity());
  if constexpr (Bf16Path::kEnabled) {
    if (block.bf16_dot) {
      using Pairs = typename Bf16Path::Pairs;
      const auto* k_pairs =
          static_cast<const Pairs*>(k_view.address(block.batch, block.kv_head, first_key));
      const int64_t k_stride = k_view.row_stride / 2;  // pairs between rows (row strides are even)
      const auto* q_pairs = reinterpret_cast<const Pairs*>(scratch.q_t);
      for (int64_t j = 0; j < keys; j += kRows) {
        const int group = static_cast<int>(std::min<int64_t>(kRows, keys - j));
        for (int64_t i = 0; i < block.columns; i += kStrip)
          if (!partial || tile.sees_any(i, i + kStrip, j, j + group))
            Bf16Path::score_rows(group, k_pairs + j * k_stride, k_stride, s.d_k / 2, q_pairs + i,
                                 job.scale_log2, scratch.scores + j * kQueryBlock + i,
                                 scratch.block_max + i);
      }
      return;
    }
  }
  const float* k_block = scratch.k_packed;
  if (block.direct_k) {
    k_block = k_view.row<const float>(block.batch, block.kv_head, first_key);
  } else {
    for (int64_t j = 0; j < keys; ++j)
      widen_row<Ops>(s.dtype, k_view.address(block.batch, block.kv_head, first_key + j),
                     scratch.k_packed + j * s.d_k, s.d_k);
  }
  for (int64_t j = 0; j < keys; j += kRows) {
    const int group = static_cast<int>(std::min<int64_t>(kRows, keys - j));
    for (int64_t i = 0; i < block.columns; i += kStrip)
      if (!partial || tile.sees_any(i, i + kStrip, j, j + group))
        score_rows<Ops>(group, k_block + j * s.d_k, s.d_k, scratch.q_t + i,
                        scratch.scores + j * kQueryBlock + i, scratch.block_max + i);
  }
}

// Modifiers, the mask of a partial block, and the online softmax on the tile.
template <class Ops>
void normalise_scores(const Job& job, const QueryBlock& block, int64_t first_key, int64_t keys,
                      bool partial, const TileKeys& tile, float headroom_log2,
                      const Scratch& scratch) {
  if (block.modified) {
    modify_scores<Ops>(job.softcap_log2, block.alibi_slope_log2,
                       job.mask->position(block.first_query) - first_key, keys, block.columns,
                       scratch.scores);
  }
  if (partial) mask_scores<Ops>(tile, keys, block.columns, scratch.scores);
  softmax_block<Ops>(keys, block.columns, partial || block.modified, headroom_log2, tile, scratch);
}

// O = alpha O + P V, each group of rows over the keys any of them sees (P = 0 elsewhere).
template <class Ops, class Bf16Path>
void accumulate_values(const Job& job, const QueryBlock& block, int64_t first_key, int64_t keys,
                       const TileKeys& tile, const Scratch& scratch) {
  constexpr int kRows = TileShape<Ops>::kRows;
  constexpr int kVectors = TileShape<Ops>::kVectors;
  constexpr int kWidth = Ops::kWidth;
  const Shape& s = job.shape;
  const TensorView& v_view = job.tensors.v;
  if constexpr (Bf16Path::kEnabled) {
    if (block.bf16_dot) {
      using Pairs = typename Bf16Path::Pairs;
      Bf16Path::pack_probability_pairs(scratch.scores, keys, block.columns);
      auto* const v_pairs = reinterpret_cast<Pairs*>(scratch.v_packed);
      Bf16Path::pack_value_pairs(v_view, block.batch, block.kv_head, first_key, keys, s.d_v,
                                 job.dv_stride, v_pairs);
      const auto* p_pairs = reinterpret_cast<const Pairs*>(scratch.scores);
      for (int64_t i = 0; i < block.rows; i += kRows) {
        const int group = static_cast<int>(std::min<int64_t>(kRows, block.rows - i));
        // The key pairs any of the group's rows sees; the rest of the block is P = 0.
        const int64_t first_pair = tile.lo[i] / 2;
        const int64_t key_pairs =
            std::max<int64_t>(0, (tile.hi[i + group - 1] + 1) / 2 - first_pair);
        for (int64_t x = 0; x < block.dv_vectors; x += kVectors) {
          const int vectors = static_cast<int>(std::min<int64_t>(kVectors, block.dv_vectors - x));
          Bf16Path::output_rows(group, vectors, p_pairs + first_pair * kQueryBlock + i, key_pairs,
                                v_pairs + first_pair * job.dv_stride + x * kWidth, job.dv_stride,
                                scratch.alpha + i, scratch.out + i * job.dv_stride + x * kWidth,
                                job.dv_stride);
        }
      }
      return;
    }
  }
  // V rows are read as whole vectors; when d_v is not a multiple of the width, or V is not fp32,
  // they are copied (widened) into zero-padded rows first.
  const float* v_block = scratch.v_packed;
  int64_t v_stride = job.dv_stride;
  if (block.direct_v) {
    v_block = v_view.row<const float>(block.batch, block.kv_head, first_key);
    v_stride = v_view.row_stride;
  } else {
    for (int64_t j = 0; j < keys; ++j) {
      float* row = scratch.v_packed + j * job.dv_stride;
      widen_row<Ops>(s.dtype, v_view.address(block.batch, block.kv_head, first_key + j), row,
                     s.d_v);
      std::fill(row + s.d_v, row + block.dv_vectors * kWidth, 0.0f);
    }
  }
  // The S kernel reads K as kRows broadcast streams, which the hardware prefetchers pick up late;
  // so while P V runs, each output tile prefetches `keys` lines of the next K block, the tiles in
  // turn covering it. Without a contiguous next block that big, the prefetches fall on k_packed,
  // already in L1.
  const int64_t window = keys * kCacheLine;  // floats one output tile prefetches
  const int64_t ahead =
      block.direct_k ? std::min(kKeyBlock, s.seq_kv - first_key - keys) * s.d_k : 0;
  const float* k_ahead =
      ahead >= window ? job.tensors.k.row<const float>(block.batch, block.kv_head, first_key + keys)
                      : scratch.k_packed;
  int64_t prefetch_tile = 0;
  for (int64_t i = 0; i < block.rows; i += kRows) {
    const int group = static_cast<int>(std::min<int64_t>(kRows, block.rows - i));
    const int64_t first = tile.lo[i];
    const int64_t count = std::max<int64_t>(0, tile.hi[i + group - 1] - first);
    for (int64_t x = 0; x < block.dv_vectors; x += kVectors) {
      const int vectors = static_cast<int>(std::min<int64_t>(kVectors, block.dv_vectors - x));
      const int64_t prefetch_offset =
          ahead >= window ? prefetch_tile++ * window % (ahead - window + 1) : 0;
      output_rows<Ops>(group, vectors, scratch.scores + first * kQueryBlock + i, count,
                       v_block + first * v_stride + x * kWidth, v_stride, scratch.alpha + i,
                       scratch.out + i * job.dv_stride + x * kWidth, job.dv_stride,
                       k_ahead + prefetch_offset);
    }
  }
}

// When the backward follows (job.lse), each row's L = max + headroom + log2(sum), +inf for a row
// that saw no key: what the backward needs to recompute P = exp2(S - L) exactly as normalised
// here (the headroom, kOverflowHeadroomLog2 or 0, is what the block's P were scaled down by).
template <class Ops>
void store_log_sum_exp(const Job& job, const QueryBlock& block, float headroom_log2,
                       const Scratch& scratch) {
  if (job.lse == nullptr) return;
  const Shape& s = job.shape;
  float* lse = job.lse + (block.batch * s.heads + block.head) * s.seq_q + block.first_query;
  for (int64_t i = 0; i < block.rows; ++i)
    lse[i] = scratch.row_sum[i] > 0
                 ? scratch.row_max[i] + (headroom_log2 + std::log2(scratch.row_sum[i]))
                 : std::numeric_limits<float>::infinity();
}

// O = accumulator / row sum, rounded to the dtype as it is stored (fp32 straight into O: a
// narrow mask's short rows of work make these per-row costs count).
template <class Ops>
void store_output(const Job& job, const QueryBlock& block, float headroom_log2,
                  const Scratch& scratch) {
  const Shape& s = job.shape;
  const TensorView& o_view = job.tensors.o;
  store_log_sum_exp<Ops>(job, block, headroom_log2, scratch);
  for (int64_t i = 0; i < block.rows; ++i) {
    const float inverse = 1.0f / scratch.row_sum[i];
    float* out = scratch.out + i * job.dv_stride;
    if (s.dtype == DType::fp32) {
      float* o_row = o_view.row<float>(block.batch, block.head, block.first_query + i);
      for (int64_t c = 0; c < s.d_v; ++c) o_row[c] = within_float_range(out[c] * inverse);
      continue;
    }
    for (int64_t c = 0; c < s.d_v; ++c) out[c] = within_float_range(out[c] * inverse);
    narrow_from_fp32(s.dtype, out, o_view.address(block.batch, block.head, block.first_query + i),
                     s.d_v);
  }
}

// The query block's unnormalised O over every key it sees, each P scaled by 2^-headroom_log2.
template <class Ops, class Bf16Path>
void accumulate_query_block(const Job& job, const QueryBlock& block, float headroom_log2,
                            const Scratch& scratch) {
  load_queries<Ops, Bf16Path>(job, block, scratch);
  TileKeys tile;
  for (int64_t first_key = block.hull.first; first_key < block.hull.last; first_key += kKeyBlock) {
    const int64_t keys = std::min(kKeyBlock, block.hull.last - first_key);
    const Visibility visibility = classify_key_block<Ops>(block, first_key, keys, tile);
    if (visibility == Visibility::none) continue;
    const bool partial = visibility == Visibility::partial;
    compute_scores<Ops, Bf16Path>(job, block, first_key, keys, partial, tile, scratch);
    normalise_scores<Ops>(job, block, first_key, keys, partial, tile, headroom_log2, scratch);
    accumulate_values<Ops, Bf16Path>(job, block, first_key, keys, tile, scratch);
  }
}

template <class Ops, class Bf16Path>
void attend_query_block(const Job& job, int64_t item, const Scratch& scratch) {
  const QueryBlock block = locate_query_block<Ops>(job, item);
  float headroom_log2 = 0;
  accumulate_query_block<Ops, Bf16Path>(job, block, headroom_log2, scratch);
  // A block whose O accumulator passed float's range (V near float's largest values) is computed
  // again with P scaled down (kOverflowHeadroomLog2), where O fits.
  if (!rows_finite<Ops>(scratch.out, block.rows, job.shape.d_v, job.dv_stride)) {
    headroom_log2 = kOverflowHeadroomLog2;
    accumulate_query_block<Ops, Bf16Path>(job, block, headroom_log2, scratch);
  }
  store_output<Ops>(job, block, headroom_log2, scratch);
}

}  // namespace attnbench::flash_cpu
