// fused's tile geometry (variants/cuda/fused_traits.h), checked on the host: the launch grid for
// awkward sequence lengths and the shared memory that lets two blocks share an H100/H200 SM.
#include "variants/cuda/fused_traits.h"

#include <catch2/catch.hpp>

#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

using testing::make_shape;

TEST_CASE("fused grid for awkward sequence lengths", "[cuda][launch]") {
  struct Case {
    int64_t seq;
    int64_t query_blocks;
  };
  for (const Case c : {Case{1, 1}, Case{63, 1}, Case{64, 1}, Case{65, 2}, Case{131, 3},
                       Case{1000, 16}, Case{131072, 2048}}) {
    const fused::Grid grid = fused::grid(make_shape(2, 8, 2, c.seq, c.seq, 64, 64, false));
    CHECK(grid.query_blocks == c.query_blocks);
    CHECK(grid.heads == 8);
    CHECK(grid.batch == 2);
    CHECK(launch::grid_limit_problem(grid.query_blocks, grid.heads, grid.batch).empty());
  }
  // The tiles each block visits, under every mask: tests/cuda/mask_math_test.cpp.
}

TEST_CASE("fused shared memory fits two blocks per H100/H200 SM at d 128", "[cuda][launch]") {
  CHECK(fused::shared_bytes(32) == 40 * 1024);
  CHECK(fused::shared_bytes(64) == 64 * 1024);
  CHECK(fused::shared_bytes(128) == 112 * 1024);
  // 227 KiB per block and 228 KiB per SM on sm_90, 1 KiB of it reserved per block.
  CHECK(fused::shared_bytes(128) <= 227 * 1024);
  CHECK(2 * (fused::shared_bytes(128) + 1024) <= 228 * 1024);
  // sm_80 allows 163 KiB per block.
  CHECK(fused::shared_bytes(128) <= 163 * 1024);
}

}  // namespace
}  // namespace attnbench
