// flash_tc's tile order (variants/cuda/flash_tc_tile_order.h): every visited tile once, the
// masked ones first, and the unmasked run exactly the tiles every row of the block sees in full.
// Plain integer arithmetic; microseconds.
#include "variants/cuda/flash_tc_tile_order.h"

#include <catch2/catch.hpp>
#include <vector>

namespace attnbench {
namespace {

mask_math::BlockTiles tiles_of(int visit_begin, int visit_end, int unmasked_begin,
                               int unmasked_end) {
  return {{visit_begin, visit_end}, {unmasked_begin, unmasked_end}};
}

TEST_CASE("flash_tc tile order: masked tiles first, every tile once", "[flash_tc][tile_order]") {
  // {visit, unmasked}: a run on both sides, only before, only after, none unmasked, all unmasked,
  // an unmasked range past the visited one (clamped), nothing visited.
  const std::vector<mask_math::BlockTiles> cases = {
      tiles_of(2, 9, 4, 7), tiles_of(0, 5, 0, 3), tiles_of(0, 5, 2, 5), tiles_of(3, 6, 5, 4),
      tiles_of(0, 4, 0, 4), tiles_of(1, 4, 0, 6), tiles_of(0, 0, 0, 0)};
  for (const mask_math::BlockTiles& tiles : cases) {
    const flash_tc::TileOrder order = flash_tc::tile_order(tiles);
    REQUIRE(order.steps() == tiles.visit.end - tiles.visit.begin);
    std::vector<int> seen(static_cast<std::size_t>(tiles.visit.end) + 1, 0);
    for (int step = 0; step < order.steps(); ++step) {
      const int tile = order.tile_at(step);
      REQUIRE(tiles.visit.holds(tile));
      ++seen[static_cast<std::size_t>(tile)];
      const bool unmasked = tiles.unmasked.holds(tile);
      CHECK(unmasked == (step >= order.masked_steps()));
      // The unmasked run is consecutive: the kernel's unmasked loop prefetches tile + 1.
      if (step > order.masked_steps()) CHECK(tile == order.tile_at(step - 1) + 1);
    }
    for (int tile = tiles.visit.begin; tile < tiles.visit.end; ++tile) CHECK(seen[tile] == 1);
  }
}

}  // namespace
}  // namespace attnbench
