// flash_cpu's decode driver: one piece of the plan (decode_plan.h), the keys [first, last) of an
// item's rows, written once against a SIMD path and compiled per path in kernels_<isa>.cpp. The
// stages, in the order a piece runs them:
//   load_decode_rows    the rows' queries pre-scaled into base 2, their visible keys, the state
//   locate_kv_tile      where a tile of up to 64 keys lives: in the tensor, or in one pool page
//                       (one table lookup per tile, its rows then streamed at a fixed stride);
//                       the two tiles after it are located before it is computed, and its
//                       kernels ask for the K and V lines of the second as they read their own
//                       (NextRows)
//   decode_scores, decode_softmax_row, decode_values   (decode_micro_kernels.h), per tile
//   write_decode_rows   O = out / sum, rounded to the dtype, for a piece that is a whole item
// and merge_decode_states, which combines a split item's partial states once all are done.
// Memory: the thread's DecodeScratch, O(kDecodeRows x d); K and V are read once per KV head.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "harness/core/element_types.h"
#include "variants/cpu/flash_cpu/decode_micro_kernels.h"
#include "variants/cpu/flash_cpu/forward_query_block.h"

namespace attnbench::flash_cpu {

// Row r of an item: query `query` of query head `head`. (These helpers are templates over the
// path only so that each path's translation unit keeps its own copy, built with its options.)
struct RowPlace {
  int64_t head, query;
};
template <class Ops>
RowPlace row_place(const Shape& s, const DecodeItem& item, int64_t r) {
  const int64_t row = item.first_row + r;
  return {row / s.seq_q, row % s.seq_q};
}

// The KV head row r of an item reads.
template <class Ops>
int64_t kv_head_of(const Shape& s, const DecodeItem& item, int64_t r) {
  return (item.first_row + r) / (s.group_size() * s.seq_q);
}

template <class Ops>
void load_decode_rows(const DecodeJob& job, const DecodeItem& item, const DecodeScratch& scratch) {
  const Shape& s = job.shape;
  const MaskGeometry& mask = (*job.masks)[static_cast<std::size_t>(item.batch)];
  for (int64_t r = 0; r < item.rows; ++r) {
    const RowPlace place = row_place<Ops>(s, item, r);
    float* q = scratch.q + r * job.dk_stride;
    const void* given = job.tensors.q.address(item.batch, place.head, place.query);
    widen_row<Ops>(s.dtype, given, q, s.d_k);
    for (int64_t c = 0; c < s.d_k; ++c) q[c] *= job.scale_log2;
    std::fill(q + s.d_k, q + job.dk_stride, 0.0f);
    if (s.dtype == DType::bf16) {
      uint16_t* bits = scratch.q_bf16 + r * job.dk_stride;
      std::memcpy(bits, given, static_cast<std::size_t>(s.d_k) * sizeof(uint16_t));
      std::fill(bits + s.d_k, bits + job.dk_stride, uint16_t{0});
    }
    const KeyRange keys = mask.keys(place.query);
    scratch.key_lo[r] = static_cast<float>(keys.first);
    scratch.key_hi[r] = static_cast<float>(keys.last);
    scratch.position[r] = static_cast<float>(mask.position(place.query));
    scratch.slope[r] = s.alibi ? static_cast<float>(alibi_slope(place.head, s.heads)) * kLog2e : 0;
    scratch.state.row_max[r] = -std::numeric_limits<float>::infinity();
    scratch.state.row_sum[r] = 0.0f;
    std::fill(scratch.state.out + r * job.dv_stride, scratch.state.out + (r + 1) * job.dv_stride,
              0.0f);
  }
}

// The K and V rows of keys [first, first + count) of an item's first KV head, row strides apart;
// its next KV heads' rows are head strides further on.
template <class Storage>
struct KvTile {
  const Storage* k = nullptr;
  const Storage* v = nullptr;
  int64_t k_stride = 0, v_stride = 0, first = 0, count = 0;
  int64_t first_kv_head = 0, kv_heads = 0;
  int64_t k_head_stride = 0, v_head_stride = 0;
  // A quantized cache's scales of the tile's keys (null for the case's dtype): key j of the
  // first KV head at k_scale[j * scale_stride], the next heads scale_head_stride further on.
  // int8 keeps one per row (stride 1, the rows of a head being adjacent in the scales), fp8_e4m3
  // one per (sequence, KV head) (stride 0).
  const float* k_scale = nullptr;
  const float* v_scale = nullptr;
  int64_t scale_stride = 0, scale_head_stride = 0;
};

// The tile starting at key `first`, at most kDecodeTile keys, never past `end` nor across a page.
template <class Ops, class Storage>
KvTile<Storage> locate_kv_tile(const DecodeJob& job, const DecodeItem& item, int64_t first,
                               int64_t end) {
  int64_t batch = item.batch, row = first, limit = end;
  if (job.pages.table != nullptr) {
    const int64_t page_size = job.pages.page_size;
    batch = job.pages.table[item.batch * job.pages.pages_per_sequence + first / page_size];
    row = first % page_size;
    limit = std::min(end, first - row + page_size);
  }
  KvTile<Storage> tile;
  tile.first = first;
  tile.count = std::min(kDecodeTile, limit - first);
  tile.first_kv_head = kv_head_of<Ops>(job.shape, item, 0);
  tile.kv_heads = kv_head_of<Ops>(job.shape, item, item.rows - 1) + 1 - tile.first_kv_head;
  // The last KV head's row is asked for too, so that the view checks every head the tile reads.
  job.tensors.k.row<const Storage>(batch, tile.first_kv_head + tile.kv_heads - 1, row);
  job.tensors.v.row<const Storage>(batch, tile.first_kv_head + tile.kv_heads - 1, row);
  tile.k = job.tensors.k.row<const Storage>(batch, tile.first_kv_head, row);
  tile.v = job.tensors.v.row<const Storage>(batch, tile.first_kv_head, row);
  tile.k_stride = job.tensors.k.row_stride;
  tile.v_stride = job.tensors.v.row_stride;
  tile.k_head_stride = job.tensors.k.head_stride;
  tile.v_head_stride = job.tensors.v.head_stride;
  if (job.k_scales != nullptr) {
    const Shape& s = job.shape;
    std::ptrdiff_t at = 0;
    if (s.kv_dtype == KvDType::int8) {
      at = (batch * s.kv_heads + tile.first_kv_head) * s.kv_stored_rows() + row;
      tile.scale_stride = 1;
      tile.scale_head_stride = s.kv_stored_rows();
    } else {
      at = item.batch * s.kv_heads + tile.first_kv_head;
      tile.scale_stride = 0;
      tile.scale_head_stride = 1;
    }
    tile.k_scale = job.k_scales + at;
    tile.v_scale = job.v_scales + at;
  }
  return tile;
}

// Whether any of the item's rows sees a key of [first, first + count).
template <class Ops>
bool any_row_sees(const DecodeScratch& scratch, int64_t rows, int64_t first, int64_t count) {
  const float lo = static_cast<float>(first), hi = static_cast<float>(first + count);
  for (int64_t r = 0; r < rows; ++r)
    if (scratch.key_lo[r] < hi && scratch.key_hi[r] > lo) return true;
  return false;
}

// Calls visit(head, g, rows) for each group of up to kDecodeGroup rows of the item, `head` being
// the KV head (counted from the tile's first) all `rows` rows from row g read.
template <class Ops, class Storage, class Visit>
void for_each_row_group(const Shape& s, const DecodeItem& item, const KvTile<Storage>& tile,
                        Visit&& visit) {
  const int64_t group_rows = s.group_size() * s.seq_q;
  for (int64_t head = 0; head < tile.kv_heads; ++head) {
    const int64_t head_first = (tile.first_kv_head + head) * group_rows - item.first_row;
    const int64_t end = std::min(item.rows, head_first + group_rows);
    for (int64_t g = std::max<int64_t>(0, head_first); g < end; g += kDecodeGroup)
      visit(head, g, std::min<int64_t>(kDecodeGroup, end - g));
  }
}

// A quantized tile's scales applied to `rows` rows of a group (kDecodeTile apart): row[j] *=
// scale[j * stride] for the tile's `count` keys. To the scores for K (q . (code k_j) s_j) and to
// the weights P for V (p_j (code v_j) s_j): O(rows x keys), beside the O(rows x keys x d) loops.
// (A template over the path, as the helpers above, so each path's object keeps its own copy.)
template <class Ops>
void scale_decode_rows(float* rows_first, int64_t rows, const float* scale, int64_t stride,
                       int64_t count) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = rows_first + r * kDecodeTile;
    if (stride == 0) {
      for (int64_t j = 0; j < count; ++j) row[j] *= scale[0];
    } else {
      for (int64_t j = 0; j < count; ++j) row[j] *= scale[j];
    }
  }
}

// How far ahead the kernels ask for K and V: the tile two on from the one they compute, 128 keys
// on a contiguous cache (64 KiB of fp32 K), two 16-key pages of all an item's KV heads on a
// paged:16 one. Against the next tile: geomean 0.955 of the time, 0.89-1.00 per case, in noisy
// rounds (results/decode-prefetch-ahead-ab); four pages on was slower on paged caches in a quick
// uncommitted run.
constexpr int kPrefetchTilesAhead = 2;
static_assert(kPrefetchTilesAhead >= 1, "the kernels ask for a tile after the one they compute");

// The K (`values` false) or V rows of KV head `head` (counted from the tile's first) in `ahead`,
// for the kernels to ask for; none when there is no such tile.
template <class Ops, class Storage>
NextRows<Ops, Storage> next_rows(const KvTile<Storage>& ahead, int64_t head, bool values) {
  if (ahead.count == 0) return {};
  if (values) return {ahead.v + head * ahead.v_head_stride, ahead.v_stride, ahead.count};
  return {ahead.k + head * ahead.k_head_stride, ahead.k_stride, ahead.count};
}

// Whether the scores are vdpbf16ps products (Dot's decode_scores): on the avx512_bf16 path,
// bf16 queries over a bf16 cache, d_k a multiple of kDecodeDotElements, and every group of four
// rows (a KV head's rows, group_size x seq_q, a multiple of kDecodeGroup). Fewer rows share each
// K vector in too few products: with one row (MHA, one core, 2K keys of d 128) they took 1.2x the
// widened FMAs' time where four took 0.86x. flash_cpu.cpp's code path says so by the same rule.
template <class Ops, class E, class Dot>
bool decode_scores_as_dot(const Shape& s) {
  if constexpr (Dot::kEnabled && std::is_same_v<E, KvElement<Ops, DType::bf16>>) {
    return s.d_k % kDecodeDotElements == 0 && s.group_size() * s.seq_q % kDecodeGroup == 0;
  } else {
    static_cast<void>(s);
    return false;
  }
}

// The scores, softmax and output update of one tile for all the item's rows, each group of rows
// against its KV head's K and V; the kernels ask for the same heads' rows of `ahead` on the way.
template <class Ops, class E, class Dot>
void attend_decode_tile(const DecodeJob& job, const DecodeItem& item,
                        const KvTile<typename E::Storage>& tile,
                        const KvTile<typename E::Storage>& ahead, const DecodeScratch& scratch) {
  const Shape& s = job.shape;
  for_each_row_group<Ops>(s, item, tile, [&](int64_t head, int64_t g, int64_t rows) {
    const float* q = scratch.q + g * job.dk_stride;
    const auto* k = tile.k + head * tile.k_head_stride;
    float* scores = scratch.scores + g * kDecodeTile;
    const auto k_ahead = next_rows<Ops>(ahead, head, false);
    if constexpr (Dot::kEnabled && std::is_same_v<E, KvElement<Ops, DType::bf16>>) {
      if (decode_scores_as_dot<Ops, E, Dot>(s)) {  // rows is 4
        Dot::decode_scores(scratch.q_bf16 + g * job.dk_stride, job.dk_stride, s.d_k, k,
                           tile.k_stride, tile.count, job.scale_log2, scores, k_ahead);
        return;
      }
    }
    switch (rows) {
      case 1:
        decode_scores<Ops, E, 1>(q, job.dk_stride, s.d_k, k, tile.k_stride, tile.count, scores,
                                 k_ahead);
        break;
      case 2:
        decode_scores<Ops, E, 2>(q, job.dk_stride, s.d_k, k, tile.k_stride, tile.count, scores,
                                 k_ahead);
        break;
      case 3:
        decode_scores<Ops, E, 3>(q, job.dk_stride, s.d_k, k, tile.k_stride, tile.count, scores,
                                 k_ahead);
        break;
      default:
        decode_scores<Ops, E, 4>(q, job.dk_stride, s.d_k, k, tile.k_stride, tile.count, scores,
                                 k_ahead);
        break;
    }
    if (tile.k_scale != nullptr)
      scale_decode_rows<Ops>(scores, rows, tile.k_scale + head * tile.scale_head_stride,
                             tile.scale_stride, tile.count);
  });
  const float first = static_cast<float>(tile.first);
  for (int64_t r = 0; r < item.rows; ++r) {
    const float hi = std::min(scratch.key_hi[r] - first, static_cast<float>(tile.count));
    scratch.alpha[r] = decode_softmax_row<Ops>(
        scratch.scores + r * kDecodeTile, tile.count, scratch.key_lo[r] - first, hi,
        job.softcap_log2, scratch.slope[r], scratch.position[r] - first, job.headroom_log2,
        scratch.state.row_max + r, scratch.state.row_sum + r);
  }
  for_each_row_group<Ops>(s, item, tile, [&](int64_t head, int64_t g, int64_t rows) {
    const float* p = scratch.scores + g * kDecodeTile;
    const float* alpha = scratch.alpha + g;
    const auto* v = tile.v + head * tile.v_head_stride;
    float* out = scratch.state.out + g * job.dv_stride;
    if (tile.v_scale != nullptr)
      scale_decode_rows<Ops>(scratch.scores + g * kDecodeTile, rows,
                             tile.v_scale + head * tile.scale_head_stride, tile.scale_stride,
                             tile.count);
    const auto v_ahead = next_rows<Ops>(ahead, head, true);
    switch (rows) {
      case 1:
        decode_values<Ops, E, 1>(p, alpha, v, tile.v_stride, tile.count, s.d_v, out, job.dv_stride,
                                 v_ahead);
        break;
      case 2:
        decode_values<Ops, E, 2>(p, alpha, v, tile.v_stride, tile.count, s.d_v, out, job.dv_stride,
                                 v_ahead);
        break;
      case 3:
        decode_values<Ops, E, 3>(p, alpha, v, tile.v_stride, tile.count, s.d_v, out, job.dv_stride,
                                 v_ahead);
        break;
      default:
        decode_values<Ops, E, 4>(p, alpha, v, tile.v_stride, tile.count, s.d_v, out, job.dv_stride,
                                 v_ahead);
        break;
    }
  });
}

// O of the item's rows from a finished state: out / sum, rounded once to the dtype; or, where the
// state's O passed float's range, nothing but the report (the pass runs again, flash_cpu.cpp).
template <class Ops>
void write_decode_rows(const DecodeJob& job, const DecodeItem& item, const PartialState& state) {
  const Shape& s = job.shape;
  if (job.overflowed != nullptr && job.headroom_log2 == 0 &&
      !rows_finite<Ops>(state.out, item.rows, s.d_v, job.dv_stride)) {
    job.overflowed->store(true, std::memory_order_relaxed);
    return;
  }
  for (int64_t r = 0; r < item.rows; ++r) {
    const RowPlace place = row_place<Ops>(s, item, r);
    float* out = state.out + r * job.dv_stride;
    const float inverse = 1.0f / state.row_sum[r];
    for (int64_t c = 0; c < s.d_v; ++c) out[c] = within_float_range(out[c] * inverse);
    narrow_from_fp32(s.dtype, out, job.tensors.o.address(item.batch, place.head, place.query),
                     s.d_v);
  }
}

// One piece, its keys read through E (a dtype's KvElement, or a quantized cache's codes).
template <class Ops, class E, class Dot>
void attend_decode_piece_as(const DecodeJob& job, const DecodeItem& item, const DecodePiece& piece,
                            const DecodeScratch& scratch) {
  using Storage = typename E::Storage;
  load_decode_rows<Ops>(job, item, scratch);
  // A located tile holds at least one key; an empty one (count 0) is past the piece's end.
  const auto located_at = [&](int64_t first) {
    return first < piece.last_key ? locate_kv_tile<Ops, Storage>(job, item, first, piece.last_key)
                                  : KvTile<Storage>{};
  };
  const auto after = [&](const KvTile<Storage>& tile) {
    return tile.count > 0 ? located_at(tile.first + tile.count) : KvTile<Storage>{};
  };
  // tiles[0] is computed while the kernels ask for tiles[kPrefetchTilesAhead].
  KvTile<Storage> tiles[kPrefetchTilesAhead + 1];
  tiles[0] = located_at(piece.first_key);
  for (int i = 1; i <= kPrefetchTilesAhead; ++i) tiles[i] = after(tiles[i - 1]);
  while (tiles[0].count > 0) {
    if (any_row_sees<Ops>(scratch, item.rows, tiles[0].first, tiles[0].count))
      attend_decode_tile<Ops, E, Dot>(job, item, tiles[0], tiles[kPrefetchTilesAhead], scratch);
    for (int i = 0; i < kPrefetchTilesAhead; ++i) tiles[i] = tiles[i + 1];
    tiles[kPrefetchTilesAhead] = after(tiles[kPrefetchTilesAhead - 1]);
  }
  if (piece.slot < 0) write_decode_rows<Ops>(job, item, scratch.state);
}

// One piece: its keys in the dtype's element type, or a quantized cache's codes. Dot: the bf16
// products of the avx512_bf16 path (bf16_dot.h), or none.
template <class Ops, class Dot = NoBf16Dot>
void attend_decode_piece(const DecodeJob& job, const DecodeItem& item, const DecodePiece& piece,
                         const DecodeScratch& scratch) {
  switch (job.shape.kv_dtype) {
    case KvDType::int8:
      attend_decode_piece_as<Ops, KvInt8Element<Ops>, Dot>(job, item, piece, scratch);
      return;
    case KvDType::fp8_e4m3:
      attend_decode_piece_as<Ops, KvFp8E4m3Element<Ops>, Dot>(job, item, piece, scratch);
      return;
    case KvDType::case_dtype: break;
  }
  switch (job.shape.dtype) {
    case DType::fp32:
      attend_decode_piece_as<Ops, KvElement<Ops, DType::fp32>, Dot>(job, item, piece, scratch);
      break;
    case DType::bf16:
      attend_decode_piece_as<Ops, KvElement<Ops, DType::bf16>, Dot>(job, item, piece, scratch);
      break;
    case DType::fp16:
      attend_decode_piece_as<Ops, KvElement<Ops, DType::fp16>, Dot>(job, item, piece, scratch);
      break;
  }
}

// A split item's `count` partial states (`state_floats` apart from `states`) combined into the
// first, each rescaled to the largest row max, then written as O.
template <class Ops>
void merge_decode_states(const DecodeJob& job, const DecodeItem& item, float* states,
                         int64_t state_floats, int64_t count) {
  const auto state = [&](int64_t i) { return PartialState::at(states + i * state_floats); };
  const PartialState into = state(0);
  for (int64_t r = 0; r < item.rows; ++r) {
    float row_max = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < count; ++i) row_max = std::max(row_max, state(i).row_max[r]);
    const float shift = row_max == -std::numeric_limits<float>::infinity() ? 0.0f : row_max;
    float* out = into.out + r * job.dv_stride;
    const float first_weight = std::exp2(into.row_max[r] - shift);
    float row_sum = into.row_sum[r] * first_weight;
    for (int64_t c = 0; c < job.shape.d_v; ++c) out[c] *= first_weight;
    for (int64_t i = 1; i < count; ++i) {
      const PartialState other_state = state(i);
      const float weight = std::exp2(other_state.row_max[r] - shift);
      row_sum += other_state.row_sum[r] * weight;
      const float* other = other_state.out + r * job.dv_stride;
      for (int64_t c = 0; c < job.shape.d_v; ++c) out[c] += other[c] * weight;
    }
    into.row_sum[r] = row_sum;
  }
  write_decode_rows<Ops>(job, item, into);
}

}  // namespace attnbench::flash_cpu
