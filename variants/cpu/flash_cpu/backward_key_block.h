// flash_cpu's backward driver (FlashAttention-2's backward): one block of up to kBackwardKeys keys
// of one (batch, kv head) against every query block that sees it, written once against a SIMD path
// and compiled per path in kernels_<isa>.cpp. For each query block of each query head of the
// group (backward_blocks.h has the split and why it has no race):
//   load_query_block         where Q and dO rows are read (in place for fp32), the rows' L and D
//   recompute_probabilities  S = Q Kᵀ, the modifiers and the mask as the forward applied them,
//                            P = exp2(S - L): the probabilities the forward normalised
//   score_gradients          dP = dO Vᵀ, dS = scale P o (dP - D) (times 1 - tanh² under softcap)
//   accumulate_gradients     dV += Pᵀ dO, dK += dSᵀ Q, dQ += dS K
// then the block's dK and dV are written. As in the forward, key-query tiles no row sees are
// skipped and only tiles a mask edge cuts through are masked element by element.
// Cost: 5 products of rows x keys x d (2.5x the forward's FLOPs) and one exp2 per visible score;
// Tiles are query-major (a row per query, the block's keys as vectors), so the per-row L and D are
// broadcasts and only K and V are transposed, once per key block; Q and dO are re-read once per
// key block, O(seq_q * d) per 96 keys.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "variants/cpu/flash_cpu/backward_blocks.h"
#include "variants/cpu/flash_cpu/backward_products.h"
#include "variants/cpu/flash_cpu/forward_query_block.h"

namespace attnbench::flash_cpu {

// One query block of one head against the key block, and how its Q and dO rows are read.
struct QueryTile {
  int64_t batch, head, kv_head;
  int64_t first_query, rows;
  int64_t first_key, keys, key_columns;  // key_columns: keys rounded up to whole vectors
  float alibi_slope_log2;
  const float* q;     // Q rows of the tile, q_stride apart (in place, or scratch.q_rows)
  const float* dout;  // dO rows, dout_stride apart
  int64_t q_stride, dout_stride;
};

// The visibility of the tile from each query row's keys, and each row's keys in `tile`. A
// template over the path only to keep a copy per translation unit.
template <class Ops>
Visibility classify_query_tile(const MaskGeometry& mask, const QueryTile& q, TileKeys& tile) {
  bool any_visible = false;
  bool all_visible = true;
  for (int64_t i = 0; i < q.rows; ++i) {
    const KeyRange range = mask.keys(q.first_query + i);
    tile.lo[i] = static_cast<int32_t>(std::clamp<int64_t>(range.first - q.first_key, 0, q.keys));
    tile.hi[i] = static_cast<int32_t>(std::clamp<int64_t>(range.last - q.first_key, 0, q.keys));
    any_visible |= tile.lo[i] < tile.hi[i];
    all_visible &= tile.lo[i] == 0 && tile.hi[i] == q.keys;
  }
  if (!any_visible) return Visibility::none;
  return all_visible ? Visibility::full : Visibility::partial;
}

// The query rows that see any of keys [first_key, end_key): one range of rows, since both ends
// of the rows' key ranges never decrease (mask.h), found by two binary searches. Query tiles then
// start at the first such row, not at a multiple of the tile: under a causal mask only the first
// tile of a key block is cut by the diagonal, and a window's band is walked without empty tiles.
template <class Ops>
KeyRange rows_seeing(const MaskGeometry& mask, int64_t seq_q, int64_t first_key, int64_t end_key) {
  auto first_row_where = [&](auto holds) {
    int64_t low = 0, high = seq_q;
    while (low < high) {
      const int64_t middle = low + (high - low) / 2;
      if (holds(mask.keys(middle))) {
        high = middle;
      } else {
        low = middle + 1;
      }
    }
    return low;
  };
  const int64_t first = first_row_where([&](KeyRange r) { return r.last > first_key; });
  const int64_t last = first_row_where([&](KeyRange r) { return r.first >= end_key; });
  return {first, std::max(first, last)};
}

// `count` values of a row of `view` widened to fp32 into `destination`, zero up to `padded`.
template <class Ops>
void load_padded_row(const TensorView& view, int64_t batch, int64_t head, int64_t row,
                     int64_t count, int64_t padded, float* destination) {
  widen_row<Ops>(view.dtype, view.address(batch, head, row), destination, count);
  std::fill(destination + count, destination + padded, 0.0f);
}

// Whether S comes from vdpbf16ps pairs (Dot's backward_scores) rather than fp32 products: only
// where the path has them (a job's flag alone never switches a path without them to pairs).
template <class Dot>
bool scores_from_pairs(const KeyBlockJob& job) {
  return Dot::kEnabled && job.bf16_dot;
}

// The key block's K as rows (for dQ) and Kᵀ (for S), Vᵀ (for dP), all fp32 with zero padding
// (keys up to whole vectors, columns up to the strides); dK and dV start at zero. Transposed once
// per key block, so the query tiles need no transposing. Under bf16_dot, Kᵀ is the bf16 K's
// pairs of columns instead, as vdpbf16ps reads them (k_t[c][j] = (k[j][2c], k[j][2c + 1])).
template <class Ops, class Dot>
void load_key_block(const KeyBlockJob& job, const QueryTile& q, const KeyBlockScratch& scratch) {
  const bool pairs = scores_from_pairs<Dot>(job);
  const Shape& s = job.shape;
  std::fill(scratch.k_t, scratch.k_t + s.d_k * kBackwardKeys, 0.0f);
  std::fill(scratch.v_t, scratch.v_t + s.d_v * kBackwardKeys, 0.0f);
  float* const v_row = scratch.dv;  // dV is zeroed after V passed through it
  for (int64_t j = 0; j < q.keys; ++j) {
    float* k_row = scratch.k_rows + j * job.dk_stride;
    load_padded_row<Ops>(job.tensors.k, q.batch, q.kv_head, q.first_key + j, s.d_k, job.dk_stride,
                         k_row);
    if (pairs) {
      const auto* row =
          static_cast<const char*>(job.tensors.k.address(q.batch, q.kv_head, q.first_key + j));
      auto* const k_pairs = reinterpret_cast<uint32_t*>(scratch.k_t);
      for (int64_t c = 0; c < s.d_k / 2; ++c)
        std::memcpy(&k_pairs[c * kBackwardKeys + j], row + c * sizeof(uint32_t), sizeof(uint32_t));
    } else {
      for (int64_t c = 0; c < s.d_k; ++c) scratch.k_t[c * kBackwardKeys + j] = k_row[c];
    }
    load_padded_row<Ops>(job.tensors.v, q.batch, q.kv_head, q.first_key + j, s.d_v, job.dv_stride,
                         v_row);
    for (int64_t c = 0; c < s.d_v; ++c) scratch.v_t[c * kBackwardKeys + j] = v_row[c];
  }
  std::fill(scratch.k_rows + q.keys * job.dk_stride, scratch.k_rows + kBackwardKeys * job.dk_stride,
            0.0f);
  std::fill(scratch.dk, scratch.dk + kBackwardKeys * job.dk_stride, 0.0f);
  std::fill(scratch.dv, scratch.dv + kBackwardKeys * job.dv_stride, 0.0f);
}

// Where the tile's Q and dO rows are read: fp32 rows of whole vectors in place, anything else
// widened and zero-padded into scratch. Q times scale_log2 for S: the forward pre-scales Q, not
// K, and sums each score over d in the same order, so S and its max come out bit for bit as the
// forward's and P = exp2(S - L) keeps a dominant key's weight exact (pre-scaling K instead left
// S a rounding apart from the forward's: a few ulps of |S|, in P's exponent, about 0.5% of dV at
// scores of 1e4). And the rows' L and D.
template <class Ops, class Dot>
void load_query_block(const KeyBlockJob& job, QueryTile& q, const KeyBlockScratch& scratch) {
  const Shape& s = job.shape;
  const bool direct_q = s.dtype == DType::fp32 && s.d_k % Ops::kWidth == 0;
  const bool direct_dout = job.dout.dtype == DType::fp32 && s.d_v % Ops::kWidth == 0;
  q.q = direct_q ? job.tensors.q.row<const float>(q.batch, q.head, q.first_query) : scratch.q_rows;
  q.q_stride = direct_q ? job.tensors.q.row_stride : job.dk_stride;
  q.dout =
      direct_dout ? job.dout.row<const float>(q.batch, q.head, q.first_query) : scratch.dout_rows;
  q.dout_stride = direct_dout ? job.dout.row_stride : job.dv_stride;
  const int64_t row_index = (q.batch * s.heads + q.head) * s.seq_q + q.first_query;
  for (int64_t i = 0; i < q.rows; ++i) {
    if (!direct_q)
      load_padded_row<Ops>(job.tensors.q, q.batch, q.head, q.first_query + i, s.d_k, job.dk_stride,
                           scratch.q_rows + i * job.dk_stride);
    if (!direct_dout)
      load_padded_row<Ops>(job.dout, q.batch, q.head, q.first_query + i, s.d_v, job.dv_stride,
                           scratch.dout_rows + i * job.dv_stride);
    // A row that sees no key has P = 0 (L = +inf) and an O of 0 / 0: its D is taken as 0.
    scratch.lse[i] = job.lse[row_index + i];
    scratch.delta[i] = std::isinf(scratch.lse[i]) ? 0.0f : job.delta[row_index + i];
  }
  if (scores_from_pairs<Dot>(job)) return;  // S reads the bf16 Q's pairs instead
  // Whole vectors: direct rows are whole vectors of d_k, scratch rows are zero-padded past it.
  const auto scale = Ops::broadcast(job.scale_log2);
  const int64_t vectors_end = round_up(s.d_k, static_cast<int64_t>(Ops::kWidth));
  for (int64_t i = 0; i < q.rows; ++i)
    for (int64_t c = 0; c < vectors_end; c += Ops::kWidth)
      Ops::store(scratch.q_scaled + i * job.dk_stride + c,
                 Ops::mul(Ops::load(q.q + i * q.q_stride + c), scale));
}

// Soft-capping and ALiBi on row i of the tile's base-2 scores, as the forward applies them
// (softmax.h: modify_scores, there key-major); the derivative of each capped score,
// 1 - tanh²(s / c), is kept in `capped`.
template <class Ops>
void modify_score_row(const KeyBlockJob& job, const QueryTile& q, int64_t i, float* scores,
                      float* capped) {
  using V = typename Ops::V;
  const V cap = Ops::broadcast(job.softcap_log2);
  const V inverse_cap = Ops::broadcast(job.softcap_log2 > 0 ? 1.0f / job.softcap_log2 : 0.0f);
  const V slope = Ops::broadcast(q.alibi_slope_log2);
  // p(i) - j for key 0 of the block; key j's distance is that minus j.
  const V distance =
      Ops::broadcast(static_cast<float>(job.mask->position(q.first_query + i) - q.first_key));
  for (int64_t j = 0; j < q.key_columns; j += Ops::kWidth) {
    V score = Ops::load(scores + j);
    if (job.softcap_log2 > 0) {
      const V x = Ops::mul(score, inverse_cap);
      Ops::store(capped + j, tanh_slope_of<Ops>(x));
      score = Ops::mul(cap, tanh_of<Ops>(x));
    }
    if (q.alibi_slope_log2 != 0)
      score = Ops::sub(
          score, Ops::mul(slope, Ops::abs(Ops::sub(distance, Ops::load(kColumnIndex.value + j)))));
    Ops::store(scores + j, score);
  }
}

// P = exp2(S - L) for the tile, query-major: Sᵀ's scores in base 2 as the forward computed them
// (soft-capped, ALiBi; from vdpbf16ps pairs where the forward's were), normalised by the
// forward's own log-sum-exp, and 0 for every key a row does not see (padding keys too). A fully
// visible tile of whole vectors does no mask arithmetic.
template <class Ops, class Dot>
void recompute_probabilities(const KeyBlockJob& job, const QueryTile& q, bool partial,
                             const TileKeys& tile, const KeyBlockScratch& scratch) {
  bool scored = false;
  if constexpr (Dot::kEnabled) {
    if (scores_from_pairs<Dot>(job)) {
      using Pairs = typename Dot::Pairs;
      const auto* q_pairs =
          static_cast<const Pairs*>(job.tensors.q.address(q.batch, q.head, q.first_query));
      const int64_t q_stride = job.tensors.q.row_stride / 2;  // pairs (row strides are even)
      Dot::backward_scores(q.rows, q.key_columns, job.shape.d_k / 2, q_pairs, q_stride,
                           reinterpret_cast<const Pairs*>(scratch.k_t), kBackwardKeys,
                           job.scale_log2, scratch.p, kBackwardKeys);
      scored = true;
    }
  }
  if (!scored) {
    const ProductOperands q_k{scratch.q_scaled, job.dk_stride, 1, scratch.k_t, kBackwardKeys};
    product<Ops>(q.rows, q.key_columns, job.shape.d_k, q_k, scratch.p, kBackwardKeys, false);
  }
  const bool modified = job.softcap_log2 > 0 || q.alibi_slope_log2 != 0;
  const bool masked = partial || q.keys < q.key_columns;
  for (int64_t i = 0; i < q.rows; ++i) {
    float* row = scratch.p + i * kBackwardKeys;
    if (modified) modify_score_row<Ops>(job, q, i, row, scratch.capped + i * kBackwardKeys);
    const auto lse = Ops::broadcast(scratch.lse[i]);
    for (int64_t j = 0; j < q.key_columns; j += Ops::kWidth)
      Ops::store(row + j, Ops::exp2(Ops::sub(Ops::load(row + j), lse)));
    if (masked) {
      const int64_t lo = partial ? tile.lo[i] : 0, hi = partial ? tile.hi[i] : q.keys;
      std::fill(row, row + lo, 0.0f);
      std::fill(row + std::max(lo, hi), row + q.key_columns, 0.0f);
    }
  }
}

// One vector of dS = scale P o (dP - D), times 1 - tanh² of the capped scores under softcap, from
// the vectors of P, that derivative and dP at `p`, `slope` and `dp`; both backwards' step between
// their products.
template <class Ops>
inline __attribute__((always_inline)) typename Ops::V score_gradient(typename Ops::V scale,
                                                                     typename Ops::V delta,
                                                                     bool capped, const float* p,
                                                                     const float* slope,
                                                                     const float* dp) {
  using V = typename Ops::V;
  V gradient = Ops::mul(Ops::mul(scale, Ops::load(p)), Ops::sub(Ops::load(dp), delta));
  if (capped) gradient = Ops::mul(gradient, Ops::load(slope));
  return gradient;
}

// The same, stored over the dP it was taken from.
template <class Ops>
inline __attribute__((always_inline)) void store_score_gradient(typename Ops::V scale,
                                                                typename Ops::V delta, bool capped,
                                                                const float* p, const float* slope,
                                                                float* ds) {
  Ops::store(ds, score_gradient<Ops>(scale, delta, capped, p, slope, ds));
}

// dP = dO Vᵀ, then dS = scale P o (dP - D), times the softcap's derivative 1 - tanh² where it
// applies (ALiBi's bias does not depend on Q or K: it adds nothing here).
template <class Ops>
void score_gradients(const KeyBlockJob& job, const QueryTile& q, const KeyBlockScratch& scratch) {
  using V = typename Ops::V;
  const ProductOperands dout_v{q.dout, q.dout_stride, 1, scratch.v_t, kBackwardKeys};
  product<Ops>(q.rows, q.key_columns, job.shape.d_v, dout_v, scratch.ds, kBackwardKeys, false);
  const V scale = Ops::broadcast(job.scale);
  const bool capped = job.softcap_log2 > 0;
  for (int64_t i = 0; i < q.rows; ++i) {
    const V delta = Ops::broadcast(scratch.delta[i]);
    for (int64_t j = 0; j < q.key_columns; j += Ops::kWidth) {
      const int64_t at = i * kBackwardKeys + j;
      store_score_gradient<Ops>(scale, delta, capped, scratch.p + at, scratch.capped + at,
                                scratch.ds + at);
    }
  }
}

// dV += Pᵀ dO and dK += dSᵀ Q into the key block's accumulators, dQ += dS K into the thread's
// copy of dQ: each over the tile's real query rows and keys.
template <class Ops>
void accumulate_gradients(const KeyBlockJob& job, const QueryTile& q,
                          const KeyBlockScratch& scratch) {
  const Shape& s = job.shape;
  const int64_t dk_columns = round_up(s.d_k, Ops::kWidth);
  const int64_t dv_columns = round_up(s.d_v, Ops::kWidth);
  const ProductOperands p_dout{scratch.p, 1, kBackwardKeys, q.dout, q.dout_stride};
  product<Ops>(q.keys, dv_columns, q.rows, p_dout, scratch.dv, job.dv_stride, true);
  const ProductOperands ds_q{scratch.ds, 1, kBackwardKeys, q.q, q.q_stride};
  product<Ops>(q.keys, dk_columns, q.rows, ds_q, scratch.dk, job.dk_stride, true);
  const ProductOperands ds_k{scratch.ds, kBackwardKeys, 1, scratch.k_rows, job.dk_stride};
  float* dq = scratch.dq + ((q.batch * s.heads + q.head) * s.seq_q + q.first_query) * job.dk_stride;
  product<Ops>(q.rows, dk_columns, q.keys, ds_k, dq, job.dk_stride, true);
}

// The key block's dK and dV rows, fp32, in the gradients' layout.
template <class Ops>
void store_key_block(const KeyBlockJob& job, const QueryTile& q, const KeyBlockScratch& scratch) {
  const Shape& s = job.shape;
  for (int64_t j = 0; j < q.keys; ++j) {
    std::copy_n(scratch.dk + j * job.dk_stride, s.d_k,
                job.dk.row<float>(q.batch, q.kv_head, q.first_key + j));
    std::copy_n(scratch.dv + j * job.dv_stride, s.d_v,
                job.dv.row<float>(q.batch, q.kv_head, q.first_key + j));
  }
}

// Dot: NoBf16Dot, or the avx512_bf16 path's Bf16Dot, whose S products a bf16_dot job's forward
// ran (forward_query_block.h).
template <class Ops, class Dot = NoBf16Dot>
void backward_key_block(const KeyBlockJob& job, int64_t item, const KeyBlockScratch& scratch) {
  const Shape& s = job.shape;
  QueryTile q{};
  const int64_t kv_index = item / job.key_blocks;  // b * kv_heads + kv head
  q.batch = kv_index / s.kv_heads;
  q.kv_head = kv_index % s.kv_heads;
  // Odd heads walk their key blocks backwards: under a causal mask a block costs more the earlier
  // it is, and the threads' fixed round-robin (flash_cpu.cpp) then evens out over two heads.
  const int64_t block = item % job.key_blocks;
  q.first_key = (kv_index % 2 == 0 ? block : job.key_blocks - 1 - block) * kBackwardKeys;
  q.keys = std::min(kBackwardKeys, s.seq_kv - q.first_key);
  q.key_columns = round_up(q.keys, Ops::kWidth);
  load_key_block<Ops, Dot>(job, q, scratch);
  const KeyRange rows = rows_seeing<Ops>(*job.mask, s.seq_q, q.first_key, q.first_key + q.keys);
  TileKeys tile;
  for (int64_t g = 0; g < s.group_size(); ++g) {
    q.head = q.kv_head * s.group_size() + g;
    q.alibi_slope_log2 = s.alibi ? static_cast<float>(alibi_slope(q.head, s.heads)) * kLog2e : 0;
    for (q.first_query = rows.first; q.first_query < rows.last; q.first_query += kQueryBlock) {
      q.rows = std::min(kQueryBlock, rows.last - q.first_query);
      const Visibility visibility = classify_query_tile<Ops>(*job.mask, q, tile);
      if (visibility == Visibility::none) continue;
      load_query_block<Ops, Dot>(job, q, scratch);
      recompute_probabilities<Ops, Dot>(job, q, visibility == Visibility::partial, tile, scratch);
      score_gradients<Ops>(job, q, scratch);
      accumulate_gradients<Ops>(job, q, scratch);
    }
  }
  store_key_block<Ops>(job, q, scratch);
}

}  // namespace attnbench::flash_cpu
