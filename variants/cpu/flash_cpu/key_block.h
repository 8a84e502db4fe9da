// flash_cpu's backward driver (FlashAttention-2's backward): one block of up to kKeyBlock keys of
// one (batch, kv head) against every query block that sees it, written once against a SIMD path
// and compiled per path in kernels_<isa>.cpp. For each query block of each query head of the
// group (key_blocks.h has the split and why it has no race):
//   load_query_block         Qᵀ (pre-scaled into base 2), Q, dOᵀ, dO, and the rows' L and D
//   recompute_probabilities  Sᵀ = K Qᵀ, the modifiers and the mask as the forward applied them,
//                            P = exp2(S - L): the probabilities the forward normalised
//   score_gradients          dPᵀ = V dOᵀ, dS = scale P o (dP - D) (times 1 - tanh² under softcap)
//   accumulate_gradients     dV += Pᵀ dO, dK += dSᵀ Q, dQ += dS K
// then the block's dK and dV are written. As in the forward, key-query tiles no row sees are
// skipped and only tiles a mask edge cuts through are masked element by element.
// Cost: 5 products of rows x keys x d (2.5x the forward's FLOPs) and one exp2 per visible score;
// Q and dO are re-read (and transposed) once per key block: O(seq_q * d) per 48 keys.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "variants/cpu/flash_cpu/key_blocks.h"
#include "variants/cpu/flash_cpu/product_tiles.h"
#include "variants/cpu/flash_cpu/query_block.h"

namespace attnbench::flash_cpu {

// One query block of one head against the key block.
struct QueryTile {
  int64_t batch, head, kv_head;
  int64_t first_query, rows, columns;  // columns: rows rounded up to whole vectors
  int64_t first_key, keys;
  float alibi_slope_log2;
};

// The visibility of the tile from each query row's keys, and each column's keys in `tile`
// (padding columns see none). A template over the path only to keep a copy per translation unit.
template <class Ops>
Visibility classify_query_tile(const MaskGeometry& mask, const QueryTile& q, TileKeys& tile) {
  bool any_visible = false;
  bool all_visible = true;
  for (int64_t i = 0; i < q.columns; ++i) {
    const KeyRange range = i < q.rows ? mask.keys(q.first_query + i) : KeyRange{};
    tile.lo[i] = static_cast<int32_t>(std::clamp<int64_t>(range.first - q.first_key, 0, q.keys));
    tile.hi[i] = static_cast<int32_t>(std::clamp<int64_t>(range.last - q.first_key, 0, q.keys));
    if (i >= q.rows) tile.hi[i] = tile.lo[i];
    const bool sees = tile.lo[i] < tile.hi[i];
    any_visible |= sees;
    if (i < q.rows) all_visible &= tile.lo[i] == 0 && tile.hi[i] == q.keys;
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

// K and V of the key block, widened and padded; dK and dV start at zero.
template <class Ops>
void load_key_block(const KeyBlockJob& job, const QueryTile& q, const KeyBlockScratch& scratch) {
  const Shape& s = job.shape;
  for (int64_t j = 0; j < q.keys; ++j) {
    load_padded_row<Ops>(job.tensors.k, q.batch, q.kv_head, q.first_key + j, s.d_k, job.dk_stride,
                         scratch.k_rows + j * job.dk_stride);
    load_padded_row<Ops>(job.tensors.v, q.batch, q.kv_head, q.first_key + j, s.d_v, job.dv_stride,
                         scratch.v_rows + j * job.dv_stride);
  }
  std::fill(scratch.dk, scratch.dk + kKeyBlock * job.dk_stride, 0.0f);
  std::fill(scratch.dv, scratch.dv + kKeyBlock * job.dv_stride, 0.0f);
}

// Q, dO of the query block (rows and transposed, padding zero), its L (padding +inf, so P = 0)
// and D.
template <class Ops>
void load_query_block(const KeyBlockJob& job, const QueryTile& q, const KeyBlockScratch& scratch) {
  const Shape& s = job.shape;
  const int64_t row_index = (q.batch * s.heads + q.head) * s.seq_q + q.first_query;
  for (int64_t i = 0; i < q.rows; ++i) {
    float* q_row = scratch.q_rows + i * job.dk_stride;
    float* dout_row = scratch.dout_rows + i * job.dv_stride;
    load_padded_row<Ops>(job.tensors.q, q.batch, q.head, q.first_query + i, s.d_k, job.dk_stride,
                         q_row);
    load_padded_row<Ops>(job.dout, q.batch, q.head, q.first_query + i, s.d_v, job.dv_stride,
                         dout_row);
    for (int64_t c = 0; c < s.d_k; ++c)
      scratch.q_t[c * kQueryBlock + i] = q_row[c] * job.scale_log2;
    for (int64_t c = 0; c < s.d_v; ++c) scratch.dout_t[c * kQueryBlock + i] = dout_row[c];
    // A row that sees no key has P = 0 (L = +inf) and an O of 0 / 0: its D is taken as 0.
    scratch.lse[i] = job.lse[row_index + i];
    scratch.delta[i] = std::isinf(scratch.lse[i]) ? 0.0f : job.delta[row_index + i];
  }
  for (int64_t c = 0; c < s.d_k; ++c)
    std::fill(scratch.q_t + c * kQueryBlock + q.rows, scratch.q_t + c * kQueryBlock + q.columns,
              0.0f);
  for (int64_t c = 0; c < s.d_v; ++c)
    std::fill(scratch.dout_t + c * kQueryBlock + q.rows,
              scratch.dout_t + c * kQueryBlock + q.columns, 0.0f);
  std::fill(scratch.lse + q.rows, scratch.lse + q.columns, std::numeric_limits<float>::infinity());
  std::fill(scratch.delta + q.rows, scratch.delta + q.columns, 0.0f);
}

// P = exp2(S - L), key-major, for the tile: the scores in base 2 as the forward computed them
// (soft-capped, then ALiBi, then masked), normalised by the forward's own log-sum-exp. Under
// softcap, tanh of each capped score is kept in scratch.capped for its derivative.
template <class Ops>
void recompute_probabilities(const KeyBlockJob& job, const QueryTile& q, bool partial,
                             const TileKeys& tile, const KeyBlockScratch& scratch) {
  using V = typename Ops::V;
  const ProductOperands k_q{scratch.k_rows, job.dk_stride, 1, scratch.q_t, kQueryBlock};
  product<Ops>(q.keys, q.columns, job.shape.d_k, k_q, scratch.p, kQueryBlock, false);
  const int64_t distance = job.mask->position(q.first_query) - q.first_key;
  if (job.softcap_log2 > 0) {
    modify_scores<Ops>(job.softcap_log2, 0.0f, distance, q.keys, q.columns, scratch.p);
    const V inverse_cap = Ops::broadcast(1.0f / job.softcap_log2);
    for (int64_t j = 0; j < q.keys; ++j)
      for (int64_t i = 0; i < q.columns; i += Ops::kWidth) {
        const int64_t at = j * kQueryBlock + i;
        Ops::store(scratch.capped + at, Ops::mul(Ops::load(scratch.p + at), inverse_cap));
      }
  }
  if (q.alibi_slope_log2 != 0)
    modify_scores<Ops>(0.0f, q.alibi_slope_log2, distance, q.keys, q.columns, scratch.p);
  if (partial) mask_scores<Ops>(tile, q.keys, q.columns, scratch.p);
  for (int64_t j = 0; j < q.keys; ++j)
    for (int64_t i = 0; i < q.columns; i += Ops::kWidth) {
      float* p = scratch.p + j * kQueryBlock + i;
      Ops::store(p, Ops::exp2(Ops::sub(Ops::load(p), Ops::load(scratch.lse + i))));
    }
}

// dPᵀ = V dOᵀ, then dS = scale P o (dP - D), times the softcap's derivative 1 - tanh² where it
// applies (ALiBi's bias does not depend on Q or K: it adds nothing here).
template <class Ops>
void score_gradients(const KeyBlockJob& job, const QueryTile& q, const KeyBlockScratch& scratch) {
  using V = typename Ops::V;
  const ProductOperands v_dout{scratch.v_rows, job.dv_stride, 1, scratch.dout_t, kQueryBlock};
  product<Ops>(q.keys, q.columns, job.shape.d_v, v_dout, scratch.ds, kQueryBlock, false);
  const V scale = Ops::broadcast(job.scale);
  const V one = Ops::broadcast(1.0f);
  const bool capped = job.softcap_log2 > 0;
  for (int64_t j = 0; j < q.keys; ++j)
    for (int64_t i = 0; i < q.columns; i += Ops::kWidth) {
      const int64_t at = j * kQueryBlock + i;
      const V p = Ops::load(scratch.p + at);
      V ds = Ops::mul(Ops::mul(scale, p),
                      Ops::sub(Ops::load(scratch.ds + at), Ops::load(scratch.delta + i)));
      if (capped) {
        const V t = Ops::load(scratch.capped + at);
        ds = Ops::mul(ds, Ops::sub(one, Ops::mul(t, t)));
      }
      Ops::store(scratch.ds + at, ds);
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
  const ProductOperands p_dout{scratch.p, kQueryBlock, 1, scratch.dout_rows, job.dv_stride};
  product<Ops>(q.keys, dv_columns, q.rows, p_dout, scratch.dv, job.dv_stride, true);
  const ProductOperands ds_q{scratch.ds, kQueryBlock, 1, scratch.q_rows, job.dk_stride};
  product<Ops>(q.keys, dk_columns, q.rows, ds_q, scratch.dk, job.dk_stride, true);
  const ProductOperands ds_k{scratch.ds, 1, kQueryBlock, scratch.k_rows, job.dk_stride};
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

template <class Ops>
void backward_key_block(const KeyBlockJob& job, int64_t item, const KeyBlockScratch& scratch) {
  const Shape& s = job.shape;
  QueryTile q{};
  const int64_t kv_index = item / job.key_blocks;  // b * kv_heads + kv head
  q.batch = kv_index / s.kv_heads;
  q.kv_head = kv_index % s.kv_heads;
  // Odd heads walk their key blocks backwards: under a causal mask a block costs more the earlier
  // it is, and the threads' fixed round-robin (flash_cpu.cpp) then evens out over two heads.
  const int64_t block = item % job.key_blocks;
  q.first_key = (kv_index % 2 == 0 ? block : job.key_blocks - 1 - block) * kKeyBlock;
  q.keys = std::min(kKeyBlock, s.seq_kv - q.first_key);
  load_key_block<Ops>(job, q, scratch);
  const KeyRange rows = rows_seeing<Ops>(*job.mask, s.seq_q, q.first_key, q.first_key + q.keys);
  TileKeys tile;
  for (int64_t g = 0; g < s.group_size(); ++g) {
    q.head = q.kv_head * s.group_size() + g;
    q.alibi_slope_log2 = s.alibi ? static_cast<float>(alibi_slope(q.head, s.heads)) * kLog2e : 0;
    for (q.first_query = rows.first; q.first_query < rows.last; q.first_query += kQueryBlock) {
      q.rows = std::min(kQueryBlock, rows.last - q.first_query);
      q.columns = round_up(q.rows, Ops::kWidth);
      const Visibility visibility = classify_query_tile<Ops>(*job.mask, q, tile);
      if (visibility == Visibility::none) continue;
      load_query_block<Ops>(job, q, scratch);
      recompute_probabilities<Ops>(job, q, visibility == Visibility::partial, tile, scratch);
      score_gradients<Ops>(job, q, scratch);
      accumulate_gradients<Ops>(job, q, scratch);
    }
  }
  store_key_block<Ops>(job, q, scratch);
}

}  // namespace attnbench::flash_cpu
