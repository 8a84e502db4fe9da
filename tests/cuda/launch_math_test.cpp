// The CUDA variants' shared launch arithmetic, checked on the host (no GPU needed): ceil_div, the
// d buckets, the causal key ranges and CUDA's grid limits. Each kernel's own geometry is checked
// beside its traits (fused_traits_test.cpp, chunked_cuda_traits_test.cpp, mma_fragments_test.cpp).
#include "harness/cuda/launch_math.h"

#include <catch2/catch.hpp>
#include <vector>

#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

using testing::make_shape;

TEST_CASE("ceil_div and the d buckets", "[cuda][launch]") {
  CHECK(launch::ceil_div(1, 64) == 1);
  CHECK(launch::ceil_div(64, 64) == 1);
  CHECK(launch::ceil_div(65, 64) == 2);
  CHECK(launch::ceil_div(131072, 64) == 2048);

  CHECK(launch::d_bucket(13, 13) == 32);
  CHECK(launch::d_bucket(16, 16) == 32);
  CHECK(launch::d_bucket(32, 32) == 32);
  CHECK(launch::d_bucket(48, 48) == 64);
  CHECK(launch::d_bucket(48, 80) == 128);  // d_k != d_v: the bucket holds the larger
  CHECK(launch::d_bucket(80, 13) == 128);
  CHECK(launch::d_bucket(128, 128) == 128);
  CHECK(launch::d_bucket(129, 64) == 0);
  CHECK(launch::d_bucket(64, 256) == 0);
}

TEST_CASE("visible keys: the causal mask is aligned to the end", "[cuda][launch]") {
  CHECK(launch::visible_keys(0, 1, 1, true) == 1);
  CHECK(launch::visible_keys(0, 1, 77, true) == 77);  // decode sees everything
  CHECK(launch::visible_keys(0, 45, 200, true) == 156);
  CHECK(launch::visible_keys(44, 45, 200, true) == 200);
  CHECK(launch::visible_keys(63, 45, 200, true) == 200);  // padding row: clamped
  CHECK(launch::visible_keys(10, 129, 129, true) == 11);
  CHECK(launch::visible_keys(10, 129, 129, false) == 129);
  for (int64_t row = 0; row < 131; ++row) {
    const Shape shape = make_shape(1, 1, 1, 131, 300, 16, 16, true);
    CHECK(launch::visible_keys(row, 131, 300, true) == shape.visible_keys(row));
  }
}

TEST_CASE("grid limits", "[cuda][launch]") {
  CHECK(launch::grid_limit_problem(1, 1, 1).empty());
  CHECK(launch::grid_limit_problem(2147483647, 65535, 65535).empty());
  CHECK_FALSE(launch::grid_limit_problem(2147483648LL, 1, 1).empty());
  CHECK_FALSE(launch::grid_limit_problem(1, 65536, 1).empty());
  CHECK_FALSE(launch::grid_limit_problem(1, 1, 70000).empty());
  CHECK_FALSE(launch::grid_limit_problem(0, 1, 1).empty());
}

}  // namespace
}  // namespace attnbench
