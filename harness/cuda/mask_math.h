// The mask geometry and score modifiers of the fused CUDA kernels, as __host__ __device__ code so
// the kernels and the host tests run the very same functions: which keys a query row sees, the key
// tiles a block of rows loops over, how one tile relates to those rows (skip it, compute it with no
// mask arithmetic, or mask it element by element), and soft-capping and ALiBi in log2 units.
//
// It is mask.h's MaskGeometry cut down to what a kernel can afford: a handful of ints passed by
// value, and for documents the start row of each document in a small device array (binary search,
// once per row a block owns, never per tile). It relies on what mask.h states: every row's visible
// keys are one contiguous range whose both ends never decrease with the row. So the keys of a block
// of rows are bounded by its first row's start and its last row's end (the hull), and a tile is
// fully visible when the last row starts at or before it and the first row ends at or after it.
// Moreover consecutive rows' ranges overlap or touch (a document's first row starts where the
// previous row's range ends), so the union of a block's ranges is its whole hull: a tile inside the
// hull is never fully masked for the block that computed the hull, only for a subset of its rows
// (a warp of flash_tc). tests/cuda/mask_math_test.cpp checks all of it against MaskGeometry.
//
// 32-bit throughout: the kernels take sequence lengths that fit an int (prepare() checks), and
// 64-bit arithmetic per score costs registers.
#pragma once

#include <math.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "harness/core/mask.h"
#include "harness/core/shape.h"
#include "harness/cuda/launch_math.h"

namespace attnbench::mask_math {

// The mask of one launch, passed by value in the kernel's parameters.
struct DeviceMask {
  MaskKind kind;
  int seq_q;
  int seq_kv;
  // window: L; prefix: P; both clamped to seq_kv (a longer one means the same), so p(i) - L and
  // max(P, p(i) + 1) cannot overflow. 0 for the other kinds.
  int length;
  // documents: the first row of each of the `documents` documents, ascending from 0; device
  // memory in a kernel, host memory in the tests. Null for the other kinds.
  const int* document_starts;
  int documents;
};

// Keys [first, last) of one row; empty when last <= first.
struct KeySpan {
  int first;
  int last;
};

// The first row of the document holding `row` (the last start at or before it).
ATTNBENCH_HOST_DEVICE inline int document_start(const DeviceMask& mask, int row) {
  int low = 0, high = mask.documents;  // starts[low] <= row < starts[high] (or high = documents)
  while (high - low > 1) {
    const int middle = (low + high) / 2;
    if (mask.document_starts[middle] <= row) {
      low = middle;
    } else {
      high = middle;
    }
  }
  return mask.document_starts[low];
}

// The keys row `row` sees, clamped to [0, seq_kv) as MaskGeometry::keys clamps them. A padding row
// past seq_q gets a harmless range (its output is never written).
ATTNBENCH_HOST_DEVICE inline KeySpan row_keys(const DeviceMask& mask, int row) {
  const int position = row + (mask.seq_kv - mask.seq_q);  // p(i), end-aligned
  int first = 0, last = mask.seq_kv;
  switch (mask.kind) {
    case MaskKind::none: break;
    case MaskKind::causal: last = position + 1; break;
    case MaskKind::window:
      // A row with p(i) < 0 sees nothing, whatever its start; this keeps p(i) - L in range.
      first = position < 0 ? 0 : position - mask.length;
      last = position + 1;
      break;
    case MaskKind::prefix: last = mask.length > position + 1 ? mask.length : position + 1; break;
    case MaskKind::documents:
      first = document_start(mask, row);
      last = position + 1;
      break;
  }
  first = first < 0 ? 0 : (first > mask.seq_kv ? mask.seq_kv : first);
  last = last < first ? first : (last > mask.seq_kv ? mask.seq_kv : last);
  return {first, last};
}

ATTNBENCH_HOST_DEVICE inline bool sees(KeySpan keys, int key) {
  return key >= keys.first && key < keys.last;
}

// The keys of the first and the last row of a block of rows (clipped to seq_q). Both ends of
// every row's range in between lie between these two rows' ends.
struct RowBlockKeys {
  KeySpan top;
  KeySpan bottom;
  bool has_rows;  // false when the block starts at or past seq_q (only padding rows)
};

ATTNBENCH_HOST_DEVICE inline RowBlockKeys block_keys(const DeviceMask& mask, int first_row,
                                                     int rows) {
  const int last_row = (first_row + rows < mask.seq_q ? first_row + rows : mask.seq_q) - 1;
  if (last_row < first_row) return {{0, 0}, {0, 0}, false};
  return {row_keys(mask, first_row), row_keys(mask, last_row), true};
}

// The smallest key range holding every key the block's rows see (MaskGeometry::keys_of_rows).
// Rows that see nothing come first and are clamped to {0, 0}, which the first row's start may then
// be: harmless, as the first row that does see a key starts at 0 too (p(i) = 0 at most L back).
ATTNBENCH_HOST_DEVICE inline KeySpan hull(const RowBlockKeys& block) {
  if (!block.has_rows || block.bottom.last <= block.top.first) return {0, 0};
  return {block.top.first, block.bottom.last};
}

// Tiles [begin, end) of `tile_keys` keys each.
struct TileRange {
  int begin;
  int end;
  ATTNBENCH_HOST_DEVICE bool holds(int tile) const { return tile >= begin && tile < end; }
};

// The tiles a block of rows loops over, and among them those it computes without mask arithmetic.
struct BlockTiles {
  // Those meeting the hull: the tiles outside hold no key any of the rows sees, and are never
  // loaded.
  TileRange visit;
  // Those every row sees in full: from the last row's first key to the first row's end. A tail
  // tile reaching past seq_kv is never among them (no row sees its padding keys).
  TileRange unmasked;
};

ATTNBENCH_HOST_DEVICE inline BlockTiles block_tiles(const RowBlockKeys& rows, int tile_keys) {
  BlockTiles tiles{{0, 0}, {0, 0}};
  const KeySpan keys = hull(rows);
  if (keys.last <= keys.first) return tiles;
  tiles.visit = {keys.first / tile_keys, static_cast<int>(launch::ceil_div(keys.last, tile_keys))};
  tiles.unmasked = {static_cast<int>(launch::ceil_div(rows.bottom.first, tile_keys)),
                    rows.top.last / tile_keys};
  return tiles;
}

// How tile `tile` relates to the rows: skip it, compute it with no mask, or mask it element by
// element. (Two compares a tile: the ranges are found once per block.)
ATTNBENCH_HOST_DEVICE inline TileVisibility classify(const BlockTiles& tiles, int tile) {
  if (!tiles.visit.holds(tile)) return TileVisibility::fully_masked;
  return tiles.unmasked.holds(tile) ? TileVisibility::fully_visible : TileVisibility::partial;
}

// Blocks whose later rows see more keys (causal, prefix) run heaviest-first: launched in reverse,
// the long blocks do not trail at the end of the grid.
ATTNBENCH_HOST_DEVICE inline bool reverse_block_order(MaskKind kind) {
  return kind == MaskKind::causal || kind == MaskKind::prefix;
}

// --- score modifiers in log2 units ---------------------------------------------------------------
// The kernels' scores are t = log2(e) s (scale * log2(e) folded into Q or the product). mask.h's
// natural-unit formulas become, multiplying through by log2(e):
//   softcap:  log2(e) c tanh(s / c) = c' tanh(t / c')   with c' = c log2(e);
//   ALiBi:    log2(e) (-slope |p(i) - j|) = -slope' |p(i) - j|   with slope' = slope log2(e).

struct ScoreModifiers {
  float softcap_log2;          // c log2(e); 0 when soft-capping is off
  float inverse_softcap_log2;  // 1 / c'
  bool alibi;
};

inline ScoreModifiers make_modifiers(const Shape& shape) {
  ScoreModifiers modifiers{0.0f, 0.0f, shape.alibi};
  if (shape.softcap > 0) {
    modifiers.softcap_log2 = static_cast<float>(shape.softcap) * launch::kLog2e;
    modifiers.inverse_softcap_log2 = 1.0f / modifiers.softcap_log2;
  }
  return modifiers;
}

ATTNBENCH_HOST_DEVICE inline bool any_modifier(const ScoreModifiers& modifiers) {
  return modifiers.softcap_log2 > 0.0f || modifiers.alibi;
}

// alibi_slope(head, heads) (mask.h) times log2(e), in float.
ATTNBENCH_HOST_DEVICE inline float alibi_slope_log2(int head, int heads) {
  return exp2f(-8.0f * static_cast<float>(head + 1) / static_cast<float>(heads)) * launch::kLog2e;
}

// Softcap, then the ALiBi bias, on a score in log2 units for query position `position` (p(i)) and
// key `key`: mask.h's order. slope_log2 is ignored unless modifiers.alibi.
ATTNBENCH_HOST_DEVICE inline float modify_score(float score_log2, const ScoreModifiers& modifiers,
                                                float slope_log2, int position, int key) {
  if (modifiers.softcap_log2 > 0.0f) {
    score_log2 = modifiers.softcap_log2 * tanhf(score_log2 * modifiers.inverse_softcap_log2);
  }
  if (modifiers.alibi) {
    const int distance = position > key ? position - key : key - position;
    score_log2 -= slope_log2 * static_cast<float>(distance);
  }
  return score_log2;
}

// --- the host side: what prepare() builds ------------------------------------------------------

// The first row of each document, for the device array (empty unless the mask is documents).
inline std::vector<int> document_starts(const MaskSpec& spec) {
  std::vector<int> starts;
  if (spec.kind != MaskKind::documents) return starts;
  int64_t start = 0;
  for (const int64_t length : spec.doc_lens) {
    starts.push_back(static_cast<int>(start));
    start += length;
  }
  return starts;
}

// Bytes of device memory the document starts take (the variant's workspace).
inline std::size_t document_starts_bytes(const MaskSpec& spec) {
  return spec.kind == MaskKind::documents ? spec.doc_lens.size() * sizeof(int) : 0;
}

// The kernel's mask for `shape`, reading document starts from `starts` (device memory, holding
// document_starts(shape.mask); null for the other kinds).
inline DeviceMask make_device_mask(const Shape& shape, const int* starts) {
  DeviceMask mask{};
  mask.kind = shape.mask.kind;
  mask.seq_q = static_cast<int>(shape.seq_q);
  mask.seq_kv = static_cast<int>(shape.seq_kv);
  if (mask.kind == MaskKind::window || mask.kind == MaskKind::prefix) {
    mask.length = static_cast<int>(std::min<int64_t>(shape.mask.length, shape.seq_kv));
  }
  if (mask.kind == MaskKind::documents) {
    mask.document_starts = starts;
    mask.documents = static_cast<int>(shape.mask.doc_lens.size());
  }
  return mask;
}

}  // namespace attnbench::mask_math
