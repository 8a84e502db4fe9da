// flash_cpu's decode driver: one piece of the plan (decode_plan.h), the keys [first, last) of an
// item's rows, written once against a SIMD path and compiled per path in kernels_<isa>.cpp. The
// stages, in the order a piece runs them:
//   load_decode_rows    the rows' queries pre-scaled into base 2, their visible keys, the state
//   locate_kv_tile      where a tile of up to 64 keys lives, in runs: one in the tensor, or
//                       one per pool page it crosses (one table lookup per page, its rows then
//                       streamed at a fixed stride); the two tiles after it are located before
//                       it is computed, and its kernels ask for the K and V lines of a run
//                       further on as they read their own (NextRows, attend_decode_tile)
//   decode_scores_runs, decode_values_runs   (decode_micro_kernels.h), per group of rows, over
//                       all of a tile's runs in one call
//   decode_softmax_row  per row, once per tile
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
#include "variants/cpu/flash_cpu/tile_dispatch.h"

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

// A tile's keys [offset, offset + count) (counted from its first), which lie together: the K and
// V rows of the item's first KV head, row strides apart, its next KV heads' rows head strides
// further on; on a paged cache, one page's part.
// A quantized cache's scales of those keys (null for the case's dtype): key j of the first KV
// head at k_scale[j * scale_stride], the next heads scale_head_stride further on (KvTile).
template <class Storage>
struct KvRun {
  const Storage* k = nullptr;
  const Storage* v = nullptr;
  const float* k_scale = nullptr;
  const float* v_scale = nullptr;
  int64_t offset = 0, count = 0;
};

// Pages a tile gathers on a paged cache, so that pages of 8 keys or more fill a tile: a tile's
// softmax, output rescale and calls cost the same whatever its keys, and a 16-key page per tile
// made paged:16 1.23-1.38x contiguous's time with the cache in L2 (1.10-1.14x with 8 pages)
// (results/decode-paged-tiles-ab).
constexpr int kDecodeTileRuns = 8;

// Keys [first, first + count) of an item, at most kDecodeTile, in at most kRuns runs: one on a
// contiguous cache, one per page (kDecodeTileRuns) on a paged one. (The capacity is the type's:
// a contiguous cache's tiles of room for 8 runs took 1.03x the time with int8 codes from memory,
// results/decode-paged-tiles-ab.)
template <class StorageType, int kRuns>
struct KvTile {
  using Storage = StorageType;
  using Run = KvRun<Storage>;
  static constexpr int kMaxRuns = kRuns;
  Run runs[kRuns];
  int run_count = 0;
  int64_t first = 0, count = 0;
  int64_t k_stride = 0, v_stride = 0;
  int64_t first_kv_head = 0, kv_heads = 0;
  int64_t k_head_stride = 0, v_head_stride = 0;
  // int8 keeps one scale per row (stride 1, the rows of a head being adjacent in the scales),
  // fp8_e4m3 one per (sequence, KV head) (stride 0).
  int64_t scale_stride = 0, scale_head_stride = 0;
};

// The run of keys [first, limit) of pool sequence `batch` (the item's own on a contiguous cache,
// a page's on a paged one) from its row `row`.
template <class Ops, class Tile>
typename Tile::Run locate_kv_run(const DecodeJob& job, const DecodeItem& item, const Tile& tile,
                                 int64_t batch, int64_t row, int64_t first, int64_t limit) {
  using Storage = typename Tile::Storage;
  typename Tile::Run run;
  run.offset = first - tile.first;
  run.count = limit - first;
  // The last KV head's row is asked for too, so that the view checks every head the run reads.
  job.tensors.k.row<const Storage>(batch, tile.first_kv_head + tile.kv_heads - 1, row);
  job.tensors.v.row<const Storage>(batch, tile.first_kv_head + tile.kv_heads - 1, row);
  run.k = job.tensors.k.row<const Storage>(batch, tile.first_kv_head, row);
  run.v = job.tensors.v.row<const Storage>(batch, tile.first_kv_head, row);
  if (job.k_scales != nullptr) {
    const Shape& s = job.shape;
    const std::ptrdiff_t at =
        s.kv_dtype == KvDType::int8
            ? (batch * s.kv_heads + tile.first_kv_head) * s.kv_stored_rows() + row
            : item.batch * s.kv_heads + tile.first_kv_head;
    run.k_scale = job.k_scales + at;
    run.v_scale = job.v_scales + at;
  }
  return run;
}

// The tile starting at key `first`: at most kDecodeTile keys, never past `end`; on a paged cache
// the pages it crosses (one table lookup each), at most the tile's kMaxRuns of them.
// (Written in place: a tile is a few hundred bytes, and the window of tiles ahead is a ring.)
template <class Ops, class Tile>
void locate_kv_tile(const DecodeJob& job, const DecodeItem& item, int64_t first, int64_t end,
                    Tile& tile) {
  tile.run_count = 0;
  tile.first = first;
  tile.first_kv_head = kv_head_of<Ops>(job.shape, item, 0);
  tile.kv_heads = kv_head_of<Ops>(job.shape, item, item.rows - 1) + 1 - tile.first_kv_head;
  tile.k_stride = job.tensors.k.row_stride;
  tile.v_stride = job.tensors.v.row_stride;
  tile.k_head_stride = job.tensors.k.head_stride;
  tile.v_head_stride = job.tensors.v.head_stride;
  if (job.k_scales != nullptr) {
    const Shape& s = job.shape;
    const bool per_row = s.kv_dtype == KvDType::int8;
    tile.scale_stride = per_row ? 1 : 0;
    tile.scale_head_stride = per_row ? s.kv_stored_rows() : 1;
  }
  const int64_t tile_end = std::min(end, first + kDecodeTile);
  if (job.pages.table == nullptr) {
    tile.runs[tile.run_count++] =
        locate_kv_run<Ops>(job, item, tile, item.batch, first, first, tile_end);
  } else {
    const int64_t page_size = job.pages.page_size;
    const int32_t* pages = job.pages.table + item.batch * job.pages.pages_per_sequence;
    for (int64_t key = first; key < tile_end && tile.run_count < Tile::kMaxRuns;) {
      const int64_t row = key % page_size;
      const int64_t limit = std::min(tile_end, key - row + page_size);
      tile.runs[tile.run_count++] =
          locate_kv_run<Ops>(job, item, tile, pages[key / page_size], row, key, limit);
      key = limit;
    }
  }
  const typename Tile::Run& last = tile.runs[tile.run_count - 1];
  tile.count = last.offset + last.count;
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
template <class Ops, class Tile, class Visit>
void for_each_row_group(const Shape& s, const DecodeItem& item, const Tile& tile, Visit&& visit) {
  const int64_t group_rows = s.group_size() * s.seq_q;
  for (int64_t head = 0; head < tile.kv_heads; ++head) {
    const int64_t head_first = (tile.first_kv_head + head) * group_rows - item.first_row;
    const int64_t end = std::min(item.rows, head_first + group_rows);
    for (int64_t g = std::max<int64_t>(0, head_first); g < end; g += kDecodeGroup)
      visit(head, g, std::min<int64_t>(kDecodeGroup, end - g));
  }
}

// A quantized tile's scales applied to `rows` rows of a group (kDecodeTile apart): row[j] *=
// scale[j * stride] x unit (kScaleUnit, the divisor the codes were loaded with) for the tile's
// `count` keys. To the scores for K (q . (code k_j) s_j) and to the weights P for V
// (p_j (code v_j) s_j): O(rows x keys), beside the O(rows x keys x d) loops.
// (A template over the path, as the helpers above, so each path's object keeps its own copy.)
template <class Ops>
void scale_decode_rows(float* rows_first, int64_t rows, const float* scale, int64_t stride,
                       int64_t count, float unit) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = rows_first + r * kDecodeTile;
    if (stride == 0) {
      const float shared = scale[0] * unit;
      for (int64_t j = 0; j < count; ++j) row[j] *= shared;
    } else {
      for (int64_t j = 0; j < count; ++j) row[j] *= scale[j] * unit;
    }
  }
}

// How far ahead the kernels ask for K and V: at least the run two on from the one they compute,
// 128 keys on a contiguous cache (64 KiB of fp32 K). Against the next run: geomean 0.955 of the
// time, 0.89-1.00 per case, in noisy rounds (results/decode-prefetch-ahead-ab). On a paged cache,
// where a tile's runs are its pages and a KV head's runs are computed one after the other, the
// same head's run a tile on (attend_decode_tile). Every tile holds a run, so the driver locates
// that many tiles ahead.
constexpr int kPrefetchRunsAhead = 2;
constexpr int kPrefetchTilesAhead = kPrefetchRunsAhead;
static_assert(kPrefetchRunsAhead >= 1, "the kernels ask for a run after the one they compute");

// The tile being computed (window[0]) and the kPrefetchTilesAhead located after it, in a ring:
// moving on locates one tile into the computed one's place.
template <class Tile>
struct KvTileWindow {
  static constexpr int kTiles = kPrefetchTilesAhead + 1;
  Tile ring[kTiles];
  int front = 0;

  const Tile& operator[](int t) const { return ring[(front + t) % kTiles]; }
  Tile& at(int t) { return ring[(front + t) % kTiles]; }
};

// The run `runs_ahead` runs after run i of window[0], and its tile; none past the piece.
template <class Tile>
struct RunAhead {
  const Tile* tile = nullptr;
  const typename Tile::Run* run = nullptr;
};
template <class Ops, class Tile>
RunAhead<Tile> run_ahead(const KvTileWindow<Tile>& window, int i, int runs_ahead) {
  int index = i + runs_ahead;
  for (int t = 0; t < KvTileWindow<Tile>::kTiles; ++t) {
    const Tile& tile = window[t];
    if (tile.count == 0) break;
    if (index < tile.run_count) return {&tile, &tile.runs[index]};
    index -= tile.run_count;
  }
  return {};
}

// The K (`values` false) or V rows of KV head `head` (counted from the tile's first) in `ahead`,
// for the kernels to ask for; none when there is no such run.
template <class Ops, class Tile>
NextRows<Ops, typename Tile::Storage> next_rows(const RunAhead<Tile>& ahead, int64_t head,
                                                bool values) {
  if (ahead.run == nullptr) return {};
  const Tile& tile = *ahead.tile;
  if (values) return {ahead.run->v + head * tile.v_head_stride, tile.v_stride, ahead.run->count};
  return {ahead.run->k + head * tile.k_head_stride, tile.k_stride, ahead.run->count};
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

// The runs of window[0] as the kernels take them for KV head `head` (counted from the tile's
// first): its K (`values` false) or V rows, each with the rows of the run `ahead` of it to ask for.
template <class Ops, class Tile>
int kernel_runs(const Tile& tile, const RunAhead<Tile>* ahead, int64_t head, bool values,
                KernelRun<Ops, typename Tile::Storage>* runs) {
  for (int i = 0; i < tile.run_count; ++i) {
    const typename Tile::Run& run = tile.runs[i];
    runs[i].rows = values ? run.v + head * tile.v_head_stride : run.k + head * tile.k_head_stride;
    runs[i].count = run.count;
    runs[i].offset = run.offset;
    runs[i].next = next_rows<Ops>(ahead[i], head, values);
  }
  return tile.run_count;
}

// A quantized tile's K (`values` false) or V scales of KV head `head` applied to `rows` rows of
// a group (scale_decode_rows), run by run: each run's keys have their own scales (a page's).
// Nothing on a cache in the case's dtype.
template <class Ops, class E, class Tile>
void scale_tile_rows(const Tile& tile, float* rows_first, int64_t head, int64_t rows, bool values) {
  for (int i = 0; i < tile.run_count; ++i) {
    const typename Tile::Run& run = tile.runs[i];
    const float* scale = values ? run.v_scale : run.k_scale;
    if (scale != nullptr)
      scale_decode_rows<Ops>(rows_first + run.offset, rows, scale + head * tile.scale_head_stride,
                             tile.scale_stride, run.count, kScaleUnit<E>);
  }
}

// The scores of window[0] for a group of `rows` rows of KV head `head`, into their scores, run
// by run in one kernel call; the kernels ask for the same head's K rows of the runs ahead.
template <class Ops, class E, class Dot, class Tile>
void score_decode_tile(const DecodeJob& job, const Tile& tile, const RunAhead<Tile>* ahead,
                       int64_t head, int64_t rows, const float* q, const uint16_t* q_bf16,
                       float* scores) {
  const Shape& s = job.shape;
  KernelRun<Ops, typename E::Storage> runs[Tile::kMaxRuns];
  const int run_count = kernel_runs<Ops>(tile, ahead, head, false, runs);
  if constexpr (Dot::kEnabled && std::is_same_v<E, KvElement<Ops, DType::bf16>>) {
    if (decode_scores_as_dot<Ops, E, Dot>(s)) {  // rows is 4
      for (int i = 0; i < run_count; ++i)
        Dot::decode_scores(q_bf16, job.dk_stride, s.d_k, runs[i].rows, tile.k_stride, runs[i].count,
                           job.scale_log2, scores + runs[i].offset, runs[i].next);
      return;
    }
  }
  dispatch_count<kDecodeGroup>(static_cast<int>(rows), [&](auto row_count) {
    decode_scores_runs<Ops, E, decltype(row_count)::value>(q, job.dk_stride, s.d_k, runs, run_count,
                                                           tile.k_stride, scores);
  });
  scale_tile_rows<Ops, E>(tile, scores, head, rows, false);
}

// The output update of window[0] for a group of `rows` rows of KV head `head`, from their
// weights, run by run in one kernel call; alpha, the rows' rescale, before the first run. The
// kernels ask for the same head's V rows of the runs ahead.
template <class Ops, class E, class Tile>
void update_decode_tile(const DecodeJob& job, const Tile& tile, const RunAhead<Tile>* ahead,
                        int64_t head, int64_t rows, float* p, const float* alpha, float* out) {
  KernelRun<Ops, typename E::Storage> runs[Tile::kMaxRuns];
  const int run_count = kernel_runs<Ops>(tile, ahead, head, true, runs);
  scale_tile_rows<Ops, E>(tile, p, head, rows, true);
  dispatch_count<kDecodeGroup>(static_cast<int>(rows), [&](auto row_count) {
    decode_values_runs<Ops, E, decltype(row_count)::value>(p, alpha, runs, run_count, tile.v_stride,
                                                           job.shape.d_v, out, job.dv_stride);
  });
}

// The scores, softmax and output update of window[0] for all the item's rows, each group of rows
// against its KV head's K and V in one kernel call over all the tile's runs (a paged:16 tile's 4
// pages): a call per run and group took 1.03-1.07x the time of paged caches in L2
// (results/decode-paged-runs-ab). A group's runs are computed one after the other, so the kernels
// ask for the same head's run a tile on (the next tile's run i while they read run i), not two
// runs on, which would be the same head's run in this tile, a few hundred ns ahead.
template <class Ops, class E, class Dot, class Tile>
void attend_decode_tile(const DecodeJob& job, const DecodeItem& item,
                        const KvTileWindow<Tile>& window, const DecodeScratch& scratch) {
  const Shape& s = job.shape;
  const Tile& tile = window[0];
  RunAhead<Tile> ahead[Tile::kMaxRuns];
  const int runs_ahead = std::max(kPrefetchRunsAhead, tile.run_count);
  for (int i = 0; i < tile.run_count; ++i) ahead[i] = run_ahead<Ops>(window, i, runs_ahead);
  for_each_row_group<Ops>(s, item, tile, [&](int64_t head, int64_t g, int64_t rows) {
    score_decode_tile<Ops, E, Dot, Tile>(
        job, tile, ahead, head, rows, scratch.q + g * job.dk_stride,
        scratch.q_bf16 + g * job.dk_stride, scratch.scores + g * kDecodeTile);
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
    update_decode_tile<Ops, E, Tile>(job, tile, ahead, head, rows, scratch.scores + g * kDecodeTile,
                                     scratch.alpha + g, scratch.state.out + g * job.dv_stride);
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

// One piece, its keys read through E (a dtype's KvElement, or a quantized cache's codes) in
// tiles of type Tile.
template <class Ops, class E, class Dot, class Tile>
void attend_decode_piece_in(const DecodeJob& job, const DecodeItem& item, const DecodePiece& piece,
                            const DecodeScratch& scratch) {
  load_decode_rows<Ops>(job, item, scratch);
  // A located tile holds at least one key; an empty one (count 0) is past the piece's end.
  const auto locate_at = [&](int64_t first, Tile& tile) {
    if (first < piece.last_key)
      locate_kv_tile<Ops>(job, item, first, piece.last_key, tile);
    else
      tile.count = 0;
  };
  const auto end_of = [](const Tile& tile) {
    return tile.count > 0 ? tile.first + tile.count : std::numeric_limits<int64_t>::max();
  };
  // window[0] is computed while the kernels ask for runs of the tiles after it.
  KvTileWindow<Tile> window;
  locate_at(piece.first_key, window.at(0));
  for (int t = 1; t <= kPrefetchTilesAhead; ++t) locate_at(end_of(window[t - 1]), window.at(t));
  while (window[0].count > 0) {
    if (any_row_sees<Ops>(scratch, item.rows, window[0].first, window[0].count))
      attend_decode_tile<Ops, E, Dot, Tile>(job, item, window, scratch);
    locate_at(end_of(window[kPrefetchTilesAhead]), window.at(0));
    window.front = (window.front + 1) % KvTileWindow<Tile>::kTiles;
  }
  if (piece.slot < 0) write_decode_rows<Ops>(job, item, scratch.state);
}

// One piece, its keys read through E: a contiguous cache's tiles are one run each, a paged
// cache's up to kDecodeTileRuns pages.
template <class Ops, class E, class Dot>
void attend_decode_piece_as(const DecodeJob& job, const DecodeItem& item, const DecodePiece& piece,
                            const DecodeScratch& scratch) {
  using Storage = typename E::Storage;
  if (job.pages.table == nullptr)
    attend_decode_piece_in<Ops, E, Dot, KvTile<Storage, 1>>(job, item, piece, scratch);
  else
    attend_decode_piece_in<Ops, E, Dot, KvTile<Storage, kDecodeTileRuns>>(job, item, piece,
                                                                          scratch);
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
