// The fused kernels' mask geometry (harness/cuda/mask_math.h) against MaskGeometry, brute force,
// for every mask kind: each row's keys, the tiles a block loops over, and the class of every tile
// for blocks of fused's 64 rows and flash_tc's 16-row warps; and the modifiers in log2 units
// against mask.h's natural-unit formulas. No GPU needed: the kernels call these very functions.
#include "harness/cuda/mask_math.h"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "harness/core/mask.h"
#include "variants/cuda/flash_tc_traits.h"
#include "variants/cuda/fused_traits.h"

namespace attnbench {
namespace {

struct MaskCase {
  MaskSpec spec;
  int seq_q;
  int seq_kv;
};

std::string describe(const MaskCase& c) {
  return fmt::format("{} seq_q {} seq_kv {}", to_string(c.spec), c.seq_q, c.seq_kv);
}

// Windows narrower and wider than a tile and than the sequence, prefixes empty, partial and
// whole, documents of one token and of uneven lengths crossing tile edges, and seq_q != seq_kv
// wherever the mask allows it (documents need seq_q = seq_kv).
std::vector<MaskCase> mask_cases() {
  std::vector<MaskCase> cases;
  const std::vector<std::pair<int, int>> sequences = {
      {1, 1}, {1, 77}, {45, 200}, {64, 64}, {129, 129}, {150, 23}, {131, 300}, {257, 257}};
  for (const auto& [seq_q, seq_kv] : sequences) {
    for (const MaskSpec& spec :
         {MaskSpec::none(), MaskSpec::causal(), MaskSpec::window(0), MaskSpec::window(5),
          MaskSpec::window(63), MaskSpec::window(64), MaskSpec::window(100), MaskSpec::window(1000),
          MaskSpec::prefix(0), MaskSpec::prefix(40), MaskSpec::prefix(64), MaskSpec::prefix(130),
          MaskSpec::prefix(5000)}) {
      cases.push_back({spec, seq_q, seq_kv});
    }
  }
  const std::vector<std::vector<int64_t>> documents = {
      {1},
      {64},
      {1, 30, 7, 50, 41},
      {129},
      {63, 1, 1, 64, 2},
      {100, 1, 1, 1, 26},
      {17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 2},
  };
  for (const std::vector<int64_t>& lengths : documents) {
    int64_t tokens = 0;
    for (const int64_t length : lengths) tokens += length;
    cases.push_back(
        {MaskSpec::documents(lengths), static_cast<int>(tokens), static_cast<int>(tokens)});
  }
  for (const uint64_t seed : {1u, 2u, 3u}) {
    for (const int64_t count : {1, 4, 16, 64}) {
      cases.push_back({MaskSpec::documents(draw_document_lengths(300, count, seed)), 300, 300});
    }
  }
  return cases;
}

// The case's mask as a kernel gets it, with `starts` (document_starts of the case) standing in for
// the device array.
mask_math::DeviceMask device_mask(const MaskCase& c, const std::vector<int>& starts) {
  Shape shape;
  shape.seq_q = c.seq_q;
  shape.seq_kv = c.seq_kv;
  shape.set_mask(c.spec);
  return mask_math::make_device_mask(shape, starts.data());
}

TEST_CASE("mask_math: each row's keys are MaskGeometry's", "[cuda][mask]") {
  for (const MaskCase& c : mask_cases()) {
    INFO(describe(c));
    const MaskGeometry geometry(c.spec, c.seq_q, c.seq_kv);
    const std::vector<int> starts = mask_math::document_starts(c.spec);
    const mask_math::DeviceMask mask = device_mask(c, starts);
    bool all_match = true;
    for (int row = 0; row < c.seq_q; ++row) {
      const KeyRange truth = geometry.keys(row);
      const mask_math::KeySpan keys = mask_math::row_keys(mask, row);
      if (truth.empty()) {
        all_match &= keys.last <= keys.first;
      } else {
        all_match &= keys.first == truth.first && keys.last == truth.last;
      }
      for (int key = 0; key < c.seq_kv; ++key) {
        all_match &= mask_math::sees(keys, key) == geometry.visible(row, key);
      }
    }
    CHECK(all_match);
  }
}

// Blocks of `block_rows` rows (fused: 64; a flash_tc warp: 16), 64-key tiles: the loop bounds
// hold every visible pair, tiles outside them hold none, and the class of every tile is what
// brute force over its pairs says.
void check_blocks(const MaskCase& c, int block_rows, int tile_keys) {
  INFO(describe(c) << ", blocks of " << block_rows << " rows, tiles of " << tile_keys << " keys");
  const MaskGeometry geometry(c.spec, c.seq_q, c.seq_kv);
  const std::vector<int> starts = mask_math::document_starts(c.spec);
  const mask_math::DeviceMask mask = device_mask(c, starts);
  const int blocks = static_cast<int>(launch::ceil_div(c.seq_q, block_rows));
  // Tiles on either side of the key range, to see that those a block skips are masked.
  const int all_tiles = static_cast<int>(launch::ceil_div(c.seq_kv, tile_keys));
  for (int block = 0; block < blocks; ++block) {
    INFO("block " << block);
    const int row_begin = block * block_rows;
    const int row_end = std::min(row_begin + block_rows, c.seq_q);
    const mask_math::RowBlockKeys rows = mask_math::block_keys(mask, row_begin, block_rows);
    REQUIRE(rows.has_rows);
    const mask_math::KeySpan hull = mask_math::hull(rows);
    const KeyRange truth_hull = geometry.keys_of_rows(row_begin, row_end);
    if (truth_hull.empty()) {
      CHECK(hull.last <= hull.first);
    } else {
      CHECK(hull.first == truth_hull.first);
      CHECK(hull.last == truth_hull.last);
    }
    const mask_math::BlockTiles tiles = mask_math::block_tiles(rows, tile_keys);
    const mask_math::TileRange loop = tiles.visit;
    CHECK(loop.begin >= 0);
    CHECK(loop.end <= all_tiles);
    for (int tile = 0; tile < all_tiles; ++tile) {
      INFO("tile " << tile);
      const int key_begin = tile * tile_keys;
      const int key_end = key_begin + tile_keys;  // may pass seq_kv: the tail tile's padding
      int64_t visible_pairs = 0, masked_pairs = 0;
      for (int row = row_begin; row < row_end; ++row)
        for (int key = key_begin; key < key_end; ++key) {
          if (key < c.seq_kv && geometry.visible(row, key)) {
            ++visible_pairs;
          } else {
            ++masked_pairs;
          }
        }
      const TileVisibility visibility = mask_math::classify(tiles, tile);
      INFO(to_string(visibility) << ": " << visible_pairs << " visible, " << masked_pairs
                                 << " masked pairs");
      const bool in_loop = tile >= loop.begin && tile < loop.end;
      if (!in_loop) CHECK(visible_pairs == 0);
      // Exact, not only safe: a fully masked tile holds no visible pair and a partial one holds
      // both kinds, so no tile is computed in vain and no mask arithmetic is spent in vain.
      if (visibility == TileVisibility::fully_masked) CHECK(visible_pairs == 0);
      if (visibility == TileVisibility::fully_visible) CHECK(masked_pairs == 0);
      if (visibility == TileVisibility::partial) {
        CHECK(visible_pairs > 0);
        CHECK(masked_pairs > 0);
      }
      // The same answer as MaskGeometry's classifier, where the tile lies within seq_kv.
      if (key_end <= c.seq_kv) {
        CHECK(visibility == geometry.classify(row_begin, row_end, key_begin, key_end));
      }
      // A block never meets a fully masked tile inside its own hull (fused relies on it).
      if (in_loop) CHECK(visibility != TileVisibility::fully_masked);
    }
  }
}

TEST_CASE("mask_math: the tiles a block visits and the class of each", "[cuda][mask]") {
  for (const MaskCase& c : mask_cases()) {
    check_blocks(c, fused::kBlockRows, fused::kBlockKeys);
    check_blocks(c, flash_tc::kWarpRows, flash_tc::kBlockKeys);
  }
}

TEST_CASE("mask_math: a flash_tc warp skips the tiles of its block it does not need",
          "[cuda][mask]") {
  // window:100 on 1024 rows: block 4 (rows 256-319) loops over keys 156-319 (tiles 2-4); its
  // last warp (rows 304-319) sees keys 204-319 only, so tile 2 (keys 128-191) is not its.
  Shape shape;
  shape.seq_q = shape.seq_kv = 1024;
  shape.set_mask(MaskSpec::window(100));
  const mask_math::DeviceMask mask = mask_math::make_device_mask(shape, nullptr);
  const mask_math::TileRange loop =
      mask_math::block_tiles(mask_math::block_keys(mask, 256, flash_tc::kBlockRows),
                             flash_tc::kBlockKeys)
          .visit;
  CHECK(loop.begin == 2);
  CHECK(loop.end == 5);
  const mask_math::BlockTiles last_warp = mask_math::block_tiles(
      mask_math::block_keys(mask, 304, flash_tc::kWarpRows), flash_tc::kBlockKeys);
  CHECK(mask_math::classify(last_warp, 2) == TileVisibility::fully_masked);
  CHECK(mask_math::classify(last_warp, 3) == TileVisibility::partial);
  CHECK(mask_math::classify(last_warp, 4) == TileVisibility::partial);
  // window:1000 on the same rows: tiles 0-3 are seen in full by every row of that warp.
  shape.set_mask(MaskSpec::window(1000));
  const mask_math::BlockTiles wide = mask_math::block_tiles(
      mask_math::block_keys(mask_math::make_device_mask(shape, nullptr), 304, flash_tc::kWarpRows),
      flash_tc::kBlockKeys);
  CHECK(wide.visit.begin == 0);
  CHECK(wide.visit.end == 5);
  CHECK(mask_math::classify(wide, 3) == TileVisibility::fully_visible);
  CHECK(mask_math::classify(wide, 4) == TileVisibility::partial);
  // A warp wholly past seq_q has no rows: every tile is fully masked for it.
  shape.seq_q = shape.seq_kv = 70;
  const mask_math::DeviceMask short_mask = mask_math::make_device_mask(shape, nullptr);
  const mask_math::RowBlockKeys padding =
      mask_math::block_keys(short_mask, 80, flash_tc::kWarpRows);
  CHECK_FALSE(padding.has_rows);
  CHECK(mask_math::classify(mask_math::block_tiles(padding, flash_tc::kBlockKeys), 1) ==
        TileVisibility::fully_masked);
  // Causal square 200 (the old causal-only helpers' cases): blocks of rows 0-63 .. 192-199 loop
  // over 1 .. 4 tiles, from tile 0; without a mask every block visits all 4.
  shape.seq_q = shape.seq_kv = 200;
  for (const bool causal : {false, true}) {
    shape.set_mask(causal ? MaskSpec::causal() : MaskSpec::none());
    const mask_math::DeviceMask square = mask_math::make_device_mask(shape, nullptr);
    for (int block = 0; block < 4; ++block) {
      const mask_math::TileRange tiles =
          mask_math::block_tiles(mask_math::block_keys(square, 64 * block, 64), 64).visit;
      CHECK(tiles.begin == 0);
      CHECK(tiles.end == (causal ? block + 1 : 4));
    }
  }
}

TEST_CASE("mask_math: the modifiers in log2 units are mask.h's formulas", "[cuda][mask]") {
  const double log2e = 1.4426950408889634;
  for (const int heads : {1, 3, 8, 16})
    for (int head = 0; head < heads; ++head) {
      const double slope = alibi_slope(head, heads);
      CHECK(mask_math::alibi_slope_log2(head, heads) == Approx(slope * log2e).epsilon(1e-6));
    }
  for (const double softcap : {0.0, 1.0, 5.0, 30.0})
    for (const bool alibi : {false, true}) {
      Shape shape;
      shape.alibi = alibi;
      shape.softcap = softcap;
      const mask_math::ScoreModifiers modifiers = mask_math::make_modifiers(shape);
      CHECK(mask_math::any_modifier(modifiers) == (alibi || softcap > 0));
      const int heads = 8;
      for (int head = 0; head < heads; head += 3) {
        const float slope_log2 = mask_math::alibi_slope_log2(head, heads);
        for (const double score : {-200.0, -7.5, -1.0, -0.01, 0.0, 0.3, 2.0, 29.0, 31.0, 500.0})
          for (const auto& [position, key] :
               std::vector<std::pair<int, int>>{{0, 0}, {5, 2}, {2, 5}, {1000, 3}, {8191, 8191}}) {
            // mask.h, in natural units: softcap, then the bias.
            double expected = score;
            if (softcap > 0) expected = softcap * std::tanh(expected / softcap);
            const double bias = alibi ? alibi_slope(head, heads) * std::abs(position - key) : 0.0;
            expected -= bias;
            const float got = mask_math::modify_score(static_cast<float>(score * log2e), modifiers,
                                                      slope_log2, position, key);
            INFO("softcap " << softcap << (alibi ? " alibi" : "") << " head " << head << " score "
                            << score << " p(i) " << position << " key " << key);
            // Float rounding is relative to the terms, not to their difference (500 - 498.5).
            const double terms = std::abs(score) + bias;
            CHECK(static_cast<double>(got) / log2e ==
                  Approx(expected).epsilon(1e-5).margin(1e-6 * terms + 1e-6));
          }
      }
    }
}

}  // namespace
}  // namespace attnbench
