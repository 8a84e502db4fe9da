// flash_tc's fragment and tile arithmetic, checked on the host (no GPU needed): the m16n8k16
// fragment maps against the PTX ISA's tables, the S-accumulator-to-P-fragment identity, the
// ldmatrix addresses the kernel computes (each yields the fragment the mma expects, with no bank
// conflict), the conflict-free cp.async and O-staging stores, and every mask per accumulator
// element with the tiles each warp computes.
#include "harness/cuda/mma_fragments.h"

#include <catch2/catch.hpp>
#include <set>
#include <utility>
#include <vector>

#include "harness/core/mask.h"
#include "harness/cuda/mask_math.h"
#include "tests/cuda/mma_emulation.h"
#include "tests/edge_shapes.h"
#include "variants/cuda/flash_tc_traits.h"

namespace attnbench {
namespace {

TEST_CASE("m16n8k16 fragments match the PTX ISA tables", "[cuda][mma]") {
  // Spot checks from "Matrix Fragments for mma.m16n8k16 with floating point type".
  CHECK(mma::c_coord(0, 0).row == 0);
  CHECK(mma::c_coord(0, 0).col == 0);
  CHECK(mma::c_coord(5, 3).row == 9);  // groupID 1, + 8 for c2 c3
  CHECK(mma::c_coord(5, 3).col == 3);  // 2 * threadID_in_group 1 + 1
  CHECK(mma::c_coord(31, 2).row == 15);
  CHECK(mma::c_coord(31, 2).col == 6);
  CHECK(mma::a_coord(7, 5).row == 1);   // a4 a5: row groupID
  CHECK(mma::a_coord(7, 5).col == 15);  // 2 * 3 + 1 + 8
  CHECK(mma::a_coord(4, 2).row == 9);   // a2 a3: row groupID + 8
  CHECK(mma::a_coord(4, 2).col == 0);
  CHECK(mma::b_coord(6, 2).row == 12);  // b2 b3: k = 2 * 2 + 8
  CHECK(mma::b_coord(6, 2).col == 1);
  CHECK(mma::b_coord(3, 1).row == 7);
  CHECK(mma::b_coord(3, 1).col == 0);

  // Each map covers its matrix exactly once.
  std::set<std::pair<int, int>> c_seen, a_seen, b_seen;
  for (int lane = 0; lane < 32; ++lane) {
    for (int r = 0; r < 4; ++r)
      c_seen.insert({mma::c_coord(lane, r).row, mma::c_coord(lane, r).col});
    for (int e = 0; e < 8; ++e)
      a_seen.insert({mma::a_coord(lane, e).row, mma::a_coord(lane, e).col});
    for (int e = 0; e < 4; ++e)
      b_seen.insert({mma::b_coord(lane, e).row, mma::b_coord(lane, e).col});
  }
  CHECK(c_seen.size() == 16 * 8);
  CHECK(a_seen.size() == 16 * 16);
  CHECK(b_seen.size() == 16 * 8);
  for (const auto& [row, col] : c_seen) CHECK((row < 16 && col < 8));
  for (const auto& [row, col] : a_seen) CHECK((row < 16 && col < 16));
  for (const auto& [row, col] : b_seen) CHECK((row < 16 && col < 8));
}

TEST_CASE("ldmatrix's per-lane elements match the PTX ISA's layout", "[cuda][mma]") {
  // Spot checks from the ldmatrix description ("a thread holds two consecutive elements of a row
  // of an 8x8 matrix: thread T, row T / 4"; .trans loads the matrix column-major), independent of
  // mma::ldmatrix_element, which the tests' ldmatrix emulation (mma_emulation.h) takes its map
  // from: a wrong map there would be reproduced by the emulation and pass every test above.
  const auto at = [](int lane, int element, bool trans) {
    const mma::Coord c = mma::ldmatrix_element(lane, element, trans);
    return std::pair<int, int>{c.row, c.col};
  };
  using Cell = std::pair<int, int>;
  CHECK(at(0, 0, false) == Cell{0, 0});
  CHECK(at(0, 1, false) == Cell{0, 1});
  CHECK(at(5, 0, false) == Cell{1, 2});  // thread 5: row 1, the second pair of columns
  CHECK(at(5, 1, false) == Cell{1, 3});
  CHECK(at(31, 0, false) == Cell{7, 6});
  CHECK(at(31, 1, false) == Cell{7, 7});
  CHECK(at(5, 0, true) == Cell{2, 1});  // transposed: rows 2 and 3 of column 1
  CHECK(at(5, 1, true) == Cell{3, 1});
  CHECK(at(10, 0, true) == Cell{4, 2});
  CHECK(at(31, 1, true) == Cell{7, 7});
  // Every element of the 8 x 8 matrix is held by exactly one (lane, element), either way.
  for (const bool trans : {false, true}) {
    std::set<Cell> cells;
    for (int lane = 0; lane < 32; ++lane)
      for (int element = 0; element < 2; ++element) cells.insert(at(lane, element, trans));
    CHECK(cells.size() == 64);
  }
}

TEST_CASE("the S accumulators of 16 keys are the A fragment of P", "[cuda][mma]") {
  // A element e of lane L sits at (row, key) of the 16 x 16 chunk; the C register the kernel
  // packs into it must hold the same (row, key) of S.
  for (int lane = 0; lane < 32; ++lane)
    for (int e = 0; e < 8; ++e) {
      const int a_register = e / 2;
      const mma::Coord a = mma::a_coord(lane, e);
      const mma::Coord c = mma::c_coord(lane, mma::c_register_of_a(a_register) + e % 2);
      INFO("lane " << lane << " element " << e);
      CHECK(a.row == c.row);
      CHECK(a.col == 8 * mma::c_block_of_a(a_register) + c.col);
    }
}

template <int D>
std::array<int, 32> x4_offsets(mma::Coord (*address)(int), int row0, int col0) {
  std::array<int, 32> offsets{};
  for (int lane = 0; lane < 32; ++lane) {
    const mma::Coord at = address(lane);
    offsets[lane] = mma::tile_offset<D>(row0 + at.row, col0 + at.col);
  }
  return offsets;
}

// A [rows][D] tile holding value(row, col) at its swizzled place.
template <int D, class Value>
std::vector<float> filled_tile(int rows, Value value) {
  std::vector<float> tile(static_cast<std::size_t>(rows * D));
  for (int row = 0; row < rows; ++row)
    for (int col = 0; col < D; ++col) tile[mma::tile_offset<D>(row, col)] = value(row, col);
  return tile;
}

template <int D>
void check_ldmatrix_operands() {
  const auto value = [](int row, int col) { return static_cast<float>(row * 1000 + col); };
  const std::vector<float> tile = filled_tile<D>(64, value);
  for (int row0 = 0; row0 < 64; row0 += 16)
    for (int col0 = 0; col0 < D; col0 += 16) {
      INFO("D " << D << " block at row " << row0 << ", column " << col0);
      // Q: the A fragment of rows row0.., d col0.. .
      const auto q_offsets = x4_offsets<D>(mma::row_major_x4_address, row0, col0);
      CHECK(testing::ldmatrix_conflict_free(q_offsets));
      const testing::HalfRegisters q = testing::ldmatrix_x4(tile, q_offsets, false);
      // K: B = Kᵀ for keys row0.. (two 8-key blocks), d col0.. (k).
      const auto k_offsets = x4_offsets<D>(mma::column_major_x4_address, row0, col0);
      CHECK(testing::ldmatrix_conflict_free(k_offsets));
      const testing::HalfRegisters k = testing::ldmatrix_x4(tile, k_offsets, false);
      // V: B = V for keys row0.. (k), d col0.. (two 8-column blocks), transposed on the way.
      const testing::HalfRegisters v = testing::ldmatrix_x4(tile, q_offsets, true);
      bool all_match = true;
      for (int lane = 0; lane < 32; ++lane) {
        for (int e = 0; e < 8; ++e) {
          const mma::Coord a = mma::a_coord(lane, e);
          all_match &= q[lane][e / 2][e % 2] == value(row0 + a.row, col0 + a.col);
        }
        for (int r = 0; r < 4; ++r)
          for (int e = 0; e < 2; ++e) {
            const int block = r / 2;
            const mma::Coord b = mma::b_coord(lane, 2 * (r % 2) + e);  // (k, n)
            all_match &= k[lane][r][e] == value(row0 + 8 * block + b.col, col0 + b.row);
            all_match &= v[lane][r][e] == value(row0 + b.row, col0 + 8 * block + b.col);
          }
      }
      CHECK(all_match);
    }
}

TEST_CASE("the kernel's ldmatrix addresses yield the fragments, conflict-free", "[cuda][mma]") {
  check_ldmatrix_operands<64>();
  check_ldmatrix_operands<128>();
}

template <int D>
void check_store_banks() {
  INFO("D " << D);
  // cp.async: thread i of a tile load writes chunk i % (D / 8) of row i / (D / 8); each
  // quarter-warp (eight 16-byte stores) must hit eight bank groups.
  constexpr int kChunks = D / 8;
  for (int first = 0; first < 64 * kChunks; first += 8) {
    std::set<int> groups;
    for (int id = first; id < first + 8; ++id) {
      groups.insert(mma::bank_group(mma::tile_offset<D>(id / kChunks, (id % kChunks) * 8)));
    }
    CHECK(groups.size() == 8);
  }
  // O staging: lane L stores 4 bytes at (c_coord(L, 2h).row, 8 n + col) for each n and h; a
  // warp's 32 stores must hit 32 banks.
  for (int h = 0; h < 2; ++h)
    for (int n = 0; n < D / 8; ++n) {
      std::set<int> banks;
      for (int lane = 0; lane < 32; ++lane) {
        const mma::Coord at = mma::c_coord(lane, 2 * h);
        banks.insert((mma::tile_offset<D>(at.row, 8 * n + at.col) * 2 / 4) % 32);
      }
      CHECK(banks.size() == 32);
    }
  // The swizzle is a permutation of each row's chunks.
  for (int row = 0; row < 16; ++row) {
    std::set<int> offsets;
    for (int col = 0; col < D; ++col) offsets.insert(mma::tile_offset<D>(row, col));
    CHECK(offsets.size() == static_cast<std::size_t>(D));
    CHECK(*offsets.begin() == row * D);
    CHECK(*offsets.rbegin() == row * D + D - 1);
  }
}

TEST_CASE("tile loads and O staging are conflict-free", "[cuda][mma]") {
  check_store_banks<64>();
  check_store_banks<128>();
  CHECK(flash_tc::shared_bytes(64) == 40 * 1024);
  CHECK(flash_tc::shared_bytes(128) == 80 * 1024);
}

TEST_CASE("the mask per accumulator element and the tiles each warp computes", "[cuda][mma]") {
  struct Case {
    int64_t seq_q;
    int64_t seq_kv;
    MaskSpec mask;
  };
  std::vector<Case> cases;
  const std::vector<std::pair<int64_t, int64_t>> sequences = {
      {1, 1}, {1, 77}, {45, 200}, {64, 64}, {129, 129}, {131, 300}, {200, 200}, {257, 300}};
  for (const auto& [seq_q, seq_kv] : sequences)
    for (const MaskSpec& mask : {MaskSpec::none(), MaskSpec::causal(), MaskSpec::window(10),
                                 MaskSpec::window(100), MaskSpec::prefix(70)}) {
      cases.push_back({seq_q, seq_kv, mask});
    }
  cases.push_back({200, 200, MaskSpec::documents({5, 60, 1, 1, 100, 33})});
  for (const Case& c : cases) {
    INFO("seq_q " << c.seq_q << " seq_kv " << c.seq_kv << " " << to_string(c.mask));
    Shape shape = testing::make_shape(1, 1, 1, c.seq_q, c.seq_kv, 64, 64, false);
    shape.set_mask(c.mask);
    const MaskGeometry geometry = shape.mask_geometry();
    const std::vector<int> starts = mask_math::document_starts(c.mask);
    const mask_math::DeviceMask mask = mask_math::make_device_mask(shape, starts.data());
    const int blocks = static_cast<int>(launch::ceil_div(c.seq_q, flash_tc::kBlockRows));
    bool all_match = true;
    for (int block = 0; block < blocks; ++block) {
      const mask_math::TileRange block_tiles =
          mask_math::block_tiles(
              mask_math::block_keys(mask, block * flash_tc::kBlockRows, flash_tc::kBlockRows),
              flash_tc::kBlockKeys)
              .visit;
      for (int warp = 0; warp < flash_tc::kWarps; ++warp) {
        const int warp_row0 = block * flash_tc::kBlockRows + warp * flash_tc::kWarpRows;
        const mask_math::BlockTiles warp_tiles = mask_math::block_tiles(
            mask_math::block_keys(mask, warp_row0, flash_tc::kWarpRows), flash_tc::kBlockKeys);
        // A warp's tiles are among its block's.
        if (warp_tiles.visit.end > warp_tiles.visit.begin) {
          all_match &= warp_tiles.visit.begin >= block_tiles.begin;
          all_match &= warp_tiles.visit.end <= block_tiles.end;
        }
        for (int tile = 0; tile < launch::ceil_div(c.seq_kv, flash_tc::kBlockKeys); ++tile) {
          const int kv0 = tile * flash_tc::kBlockKeys;
          const TileVisibility visibility = mask_math::classify(warp_tiles, tile);
          for (int lane = 0; lane < 32; ++lane) {
            const int row_low = warp_row0 + mma::c_coord(lane, 0).row;
            const int row_high = warp_row0 + mma::c_coord(lane, 2).row;
            const mask_math::KeySpan keys_low = mask_math::row_keys(mask, row_low);
            const mask_math::KeySpan keys_high = mask_math::row_keys(mask, row_high);
            for (int j = 0; j < flash_tc::kBlockKeys / 8; ++j)
              for (int r = 0; r < 4; ++r) {
                const int row = r < 2 ? row_low : row_high;
                const int key = kv0 + 8 * j + mma::c_coord(lane, r).col;
                // Rows past seq_q are padding: whatever they see is never written.
                if (row >= c.seq_q) continue;
                const bool truth = key < c.seq_kv && geometry.visible(row, key);
                all_match &= mma::score_visible(kv0, j, lane, r, keys_low, keys_high) == truth;
                // A tile computed without the mask test is seen in full by every real row; a
                // tile the warp skips holds no key any of its rows sees.
                if (visibility == TileVisibility::fully_visible) all_match &= truth;
                if (visibility == TileVisibility::fully_masked) all_match &= !truth;
              }
          }
        }
      }
    }
    CHECK(all_match);
  }
}

template <int D>
void check_column_steps(mma::Coord (*address)(int)) {
  // Tile bases a multiple of a row (the kernel's, 256-byte aligned), row blocks of 16.
  for (const unsigned base : {0u, 256u * 40u})
    for (int row0 = 0; row0 < 64; row0 += 16)
      for (int lane = 0; lane < 32; ++lane) {
        const mma::Coord at = address(lane);
        const unsigned lane_address = base + 2 * mma::tile_offset<D>(row0 + at.row, at.col);
        for (int k = 0; k < D / 16; ++k) {
          CHECK(mma::column_step_address(lane_address, k) ==
                base + 2 * mma::tile_offset<D>(row0 + at.row, at.col + 16 * k));
        }
      }
}

TEST_CASE("a lane's ldmatrix address 16 columns on is one XOR away", "[cuda][mma]") {
  check_column_steps<64>(mma::row_major_x4_address);
  check_column_steps<64>(mma::column_major_x4_address);
  check_column_steps<128>(mma::row_major_x4_address);
  check_column_steps<128>(mma::column_major_x4_address);
}

}  // namespace
}  // namespace attnbench
