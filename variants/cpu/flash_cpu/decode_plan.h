// flash_cpu's decode path, its plan: which rows and keys each thread attends (flash-decoding).
// An item is a chunk of up to kDecodeRows query rows of one sequence: one KV head's group (its
// heads x seq_q rows), so a KV head's K/V are streamed once for all the query heads that read them
// (GQA), or in a paged cache several whole groups, so each page is read by one tile. The items'
// keys are laid end to end on one line and the line is cut into one equal segment per thread, so
// every thread streams the same number of K/V bytes whatever the sequence lengths (ragged batches)
// and whether there are fewer items than threads or not. A cut inside an item splits its keys into
// pieces; each such piece leaves a partial softmax state (row max, row sum, unnormalised output) in
// a slot of the workspace, and merge_decode_states() (decode_piece.h) combines them once every
// thread is done. Cost: built in prepare(), O(items) time and memory; at most 2 (threads - 1)
// slots of kDecodeRows x (d_v + 2) floats.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "harness/core/mask.h"
#include "harness/core/shape.h"
#include "harness/core/tensor.h"
#include "variants/cpu/flash_cpu/forward_blocks.h"

namespace attnbench::flash_cpu {

constexpr int64_t kDecodeRows = 64;  // query rows of one item: its Q and output stay in L1/L2
// Keys per tile (at most; a paged tile gathers up to 8 pages, decode_piece.h): 64, against 16 one
// thread took 16% less time per key with the cache in L3 (fewer calls and rescales per key); 32 KiB
// of fp32 K at d 128.
constexpr int64_t kDecodeTile = 64;
constexpr int64_t kSplitAlign = 64;  // a cut inside an item falls on a multiple of this many keys
// d_k in bf16 elements per vdpbf16ps (Bf16DotOn::decode_scores): those scores take d_k a
// multiple of this, from the query and key rows as stored.
constexpr int64_t kDecodeDotElements = 32;

// Rows [first_row, first_row + rows) of sequence `batch`, its rows numbered head by head: row u is
// query u % seq_q of query head u / seq_q, which reads KV head u / (group * seq_q). They see keys
// `keys` together. An item holds the rows of one KV head, or of several whole ones in a paged
// cache: there one page of all its KV heads (bhsd: [page][head][16][d], contiguous) is read by
// one tile, head by head, where one head's page alone is a 2-8 KiB piece (d 128) at a shuffled
// place.
struct DecodeItem {
  int64_t batch, first_row, rows;
  KeyRange keys;
};

// Keys [first_key, last_key) of an item; slot < 0 when the piece is the whole item (it writes O),
// else the partial state it leaves.
struct DecodePiece {
  int64_t item;
  int64_t first_key, last_key;
  int64_t slot;
};

// A paged cache's block table, as the kernels read it (empty `table` when contiguous).
struct PageTable {
  const int32_t* table = nullptr;
  int64_t pages_per_sequence = 0;
  int64_t page_size = 0;
};

// One decode call, as every piece sees it.
struct DecodeJob {
  Shape shape;
  float scale_log2;
  float softcap_log2;
  AttentionViews tensors;  // K and V are the page pools when paged
  PageTable pages;
  const std::vector<MaskGeometry>* masks;  // one per sequence: its own cache length
  int64_t dk_stride, dv_stride;            // d_k, d_v rounded up to kMaxWidth
  // A quantized cache's scales (variant.h's KvScales); null for the case's dtype.
  const float* k_scales = nullptr;
  const float* v_scales = nullptr;
  // As Job's (forward_blocks.h): 0, or kOverflowHeadroomLog2 for the pass run again after an
  // item's O accumulator passed float's range, which that item reports in `overflowed`.
  float headroom_log2 = 0;
  std::atomic<bool>* overflowed = nullptr;
};

// A partial softmax state's place in the workspace: row max, row sum, unnormalised output.
struct PartialState {
  float* row_max;  // [kDecodeRows]
  float* row_sum;  // [kDecodeRows]
  float* out;      // [kDecodeRows][dv_stride]

  static constexpr PartialState at(float* base) {
    return {base, base + kDecodeRows, base + 2 * kDecodeRows};
  }
};

// One thread's scratch for a piece.
struct DecodeScratch {
  float* q;       // [kDecodeRows][dk_stride]: the rows' queries, pre-scaled into base 2
  float* scores;  // [kDecodeRows][kDecodeTile]: a tile's scores, then probabilities
  float* alpha;   // [kDecodeRows]: the rescale of the output for this tile
  float* key_lo;  // [kDecodeRows]: as floats, each row's first and one-past-last visible key
  float* key_hi;
  float* position;     // [kDecodeRows]: the key each row's query is aligned with (ALiBi distances)
  float* slope;        // [kDecodeRows]: the row's head's ALiBi slope in base 2, or 0
  PartialState state;  // the running state; a partial piece's slot, else the thread's own
  // [kDecodeRows][dk_stride]: bf16 queries as given (unscaled, zero past d_k), for scores as
  // vdpbf16ps products (Bf16DotOn::decode_scores)
  uint16_t* q_bf16;
};

struct DecodeLayout {
  int64_t dk_stride, dv_stride, state, per_thread;  // floats, multiples of 16

  explicit DecodeLayout(const Shape& s)
      : dk_stride(round_up(s.d_k, kMaxWidth)), dv_stride(round_up(s.d_v, kMaxWidth)) {
    state = 2 * kDecodeRows + kDecodeRows * dv_stride;
    // q_bf16 last: kDecodeRows x dk_stride bf16 values in as many half floats.
    per_thread = kDecodeRows * dk_stride + kDecodeRows * kDecodeTile + 5 * kDecodeRows + state +
                 kDecodeRows * dk_stride / 2;
  }
  PartialState state_at(float* base) const { return PartialState::at(base); }
  DecodeScratch carve(float* base) const {
    DecodeScratch scratch;
    scratch.q = base;
    scratch.scores = scratch.q + kDecodeRows * dk_stride;
    scratch.alpha = scratch.scores + kDecodeRows * kDecodeTile;
    scratch.key_lo = scratch.alpha + kDecodeRows;
    scratch.key_hi = scratch.key_lo + kDecodeRows;
    scratch.position = scratch.key_hi + kDecodeRows;
    scratch.slope = scratch.position + kDecodeRows;
    scratch.state = state_at(scratch.slope + kDecodeRows);
    scratch.q_bf16 = reinterpret_cast<uint16_t*>(scratch.slope + kDecodeRows + state);
    return scratch;
  }
};

// A split item: its partial states are slots [first_slot, first_slot + count).
struct DecodeMerge {
  int64_t item, first_slot, count;
};

struct DecodePlan {
  std::vector<DecodeItem> items;
  std::vector<DecodeMerge> merges;
  std::vector<DecodePiece> pieces;
  std::vector<int64_t> thread_first_piece;  // thread t runs pieces [first[t], first[t + 1])
  int64_t slots = 0;

  DecodePlan() = default;
  DecodePlan(const Shape& s, const std::vector<MaskGeometry>& masks, int threads);
  std::size_t workspace_floats(const Shape& s, int threads) const {
    const DecodeLayout layout(s);
    return static_cast<std::size_t>(threads * layout.per_thread + slots * layout.state);
  }
};

// The decode kernels' entry points (decode_piece.h; kernels.h holds them with the other paths'):
// attend one piece; combine a split item's `count` partial states and write its O.
using DecodePieceFunction = void (*)(const DecodeJob& job, const DecodeItem& item,
                                     const DecodePiece& piece, const DecodeScratch& scratch);
using DecodeMergeFunction = void (*)(const DecodeJob& job, const DecodeItem& item, float* states,
                                     int64_t state_floats, int64_t count);

// Each sequence's mask geometry, against its own cache length (ragged batches).
inline std::vector<MaskGeometry> sequence_masks(const Shape& s) {
  std::vector<MaskGeometry> masks;
  for (int64_t b = 0; b < s.batch; ++b) masks.emplace_back(s.mask, s.seq_q, s.keys_of(b));
  return masks;
}

// The rows of sequence b in chunks: within one KV head's group (chunks of up to kDecodeRows), or,
// paged, as many whole groups as fit in kDecodeRows.
inline std::vector<DecodeItem> decode_items(const Shape& s,
                                            const std::vector<MaskGeometry>& masks) {
  std::vector<DecodeItem> items;
  const int64_t group_rows = s.group_size() * s.seq_q;
  const int64_t groups_per_item =
      s.kv_cache.is_paged() ? std::max<int64_t>(1, kDecodeRows / group_rows) : 1;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t kv_head = 0; kv_head < s.kv_heads; kv_head += groups_per_item) {
      const int64_t end_row = std::min(s.kv_heads, kv_head + groups_per_item) * group_rows;
      for (int64_t first = kv_head * group_rows; first < end_row; first += kDecodeRows) {
        DecodeItem item{b, first, std::min(kDecodeRows, end_row - first), {0, 0}};
        // A chunk that wraps past a head's last query sees the keys of the rows in between.
        const int64_t first_query = first % s.seq_q;
        const bool wraps = first_query + item.rows > s.seq_q;
        item.keys = wraps ? masks[b].keys_of_rows(0, s.seq_q)
                          : masks[b].keys_of_rows(first_query, first_query + item.rows);
        if (item.keys.last > item.keys.first) items.push_back(item);
      }
    }
  return items;
}

inline DecodePlan::DecodePlan(const Shape& s, const std::vector<MaskGeometry>& masks, int threads) {
  items = decode_items(s, masks);
  int64_t total = 0;
  for (const DecodeItem& item : items) total += item.keys.last - item.keys.first;
  // Thread t's segment of the line ends at (t + 1) total / threads, rounded to kSplitAlign keys
  // inside an item: each thread is within kSplitAlign / 2 keys of its share.
  const auto segment_end = [&](int64_t t) { return (t + 1) * total / threads; };
  int64_t position = 0;  // keys on the line before the current item
  int64_t thread = 0;
  thread_first_piece.push_back(0);
  for (int64_t index = 0; index < static_cast<int64_t>(items.size()); ++index) {
    const KeyRange keys = items[index].keys;
    for (int64_t first = keys.first; first < keys.last;) {
      int64_t last = keys.last;
      bool segment_ends = false;
      if (thread < threads - 1) {
        const int64_t end = keys.first + segment_end(thread) - position;
        segment_ends = end <= keys.last;
        const int64_t rounded = (end + kSplitAlign / 2) / kSplitAlign * kSplitAlign;
        if (end < keys.last) last = std::clamp(rounded, first, keys.last);
      }
      if (last > first) {
        const bool whole = first == keys.first && last == keys.last;
        pieces.push_back({index, first, last, whole ? -1 : slots++});
      }
      if (segment_ends) {
        thread_first_piece.push_back(static_cast<int64_t>(pieces.size()));
        ++thread;
      }
      first = last;
    }
    position += keys.last - keys.first;
  }
  while (static_cast<int64_t>(thread_first_piece.size()) <= threads)
    thread_first_piece.push_back(static_cast<int64_t>(pieces.size()));
  // An item's pieces, and so its slots, are consecutive.
  for (const DecodePiece& piece : pieces) {
    if (piece.slot < 0) continue;
    if (!merges.empty() && merges.back().item == piece.item) {
      ++merges.back().count;
    } else {
      merges.push_back({piece.item, piece.slot, 1});
    }
  }
}

}  // namespace attnbench::flash_cpu
