// The order in which a flash_tc block visits its key tiles, FlashAttention-2's split: the few
// tiles some row of the block sees only in part (those crossing a mask's edge, or seq_kv) come
// first, through the masked loop body; then the tiles every row of the block sees in full, through
// the unmasked body, which has no mask arithmetic and no per-warp tile test. A block's masked
// tiles are a run before its unmasked ones and a run after (mask_math::BlockTiles); step s of the
// block's loop maps to its tile here, a few integer operations a tile. Host and device alike, so
// the host emulation of the kernel (tests/cuda/flash_tc_emulation_test.cpp) walks the same order.
#pragma once

#include "harness/cuda/mask_math.h"

namespace attnbench::flash_tc {

struct TileOrder {
  int begin;  // the visited tiles, [begin, end)
  int end;
  int unmasked_begin;  // those every row sees in full, [unmasked_begin, unmasked_end) in visit
  int unmasked_end;

  ATTNBENCH_HOST_DEVICE int steps() const { return end - begin; }
  ATTNBENCH_HOST_DEVICE int masked_steps() const {
    return steps() - (unmasked_end - unmasked_begin);
  }
  // The masked tiles before the unmasked run, then those after it, then the unmasked run.
  ATTNBENCH_HOST_DEVICE int tile_at(int step) const {
    const int leading = unmasked_begin - begin;
    if (step < leading) return begin + step;
    const int masked = masked_steps();
    if (step < masked) return unmasked_end + (step - leading);
    return unmasked_begin + (step - masked);
  }
};

// The order of a block's tiles: `tiles` are the whole block's (all its rows), so a tile of the
// unmasked run is one each of its warps sees in full too.
ATTNBENCH_HOST_DEVICE inline TileOrder tile_order(const mask_math::BlockTiles& tiles) {
  int unmasked_begin =
      tiles.unmasked.begin > tiles.visit.begin ? tiles.unmasked.begin : tiles.visit.begin;
  int unmasked_end = tiles.unmasked.end < tiles.visit.end ? tiles.unmasked.end : tiles.visit.end;
  if (unmasked_end <= unmasked_begin) unmasked_begin = unmasked_end = tiles.visit.end;  // none
  return {tiles.visit.begin, tiles.visit.end, unmasked_begin, unmasked_end};
}

}  // namespace attnbench::flash_tc
