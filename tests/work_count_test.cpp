#include "harness/core/work_count.h"

#include <catch2/catch.hpp>

#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

using testing::make_shape;

TEST_CASE("FLOPs of a square non-causal pass are 4 B H n^2 d", "[work]") {
  const WorkCount work = count_work(make_shape(2, 4, 4, 1024, 1024, 64, 64, false));
  CHECK(work.flops == 4.0 * 2 * 4 * 1024.0 * 1024 * 64);
  CHECK(work.flop_convention == "full");
  CHECK(work.min_bytes == 4.0 * 4 * (2 * 4 * 1024 * 64));
}

TEST_CASE("causal FLOPs count only unmasked pairs, and say so", "[work]") {
  // Square, n = 4: rows see 1, 2, 3, 4 keys = 10 pairs.
  const WorkCount square = count_work(make_shape(1, 1, 1, 4, 4, 8, 8, true));
  CHECK(square.pairs == 10);
  CHECK(square.flops == 2.0 * 10 * 16);
  CHECK(square.flop_convention == "causal: unmasked pairs only");
  // seq_q 2 < seq_kv 5, aligned to the end: rows see 4 and 5 keys.
  CHECK(count_work(make_shape(1, 1, 1, 2, 5, 8, 8, true)).pairs == 9);
}

TEST_CASE("d_k and d_v count separately; weights add to the bytes", "[work]") {
  const Shape shape = make_shape(1, 1, 1, 10, 20, 16, 32, false);
  CHECK(count_work(shape).flops == 2.0 * 200 * 48);
  CHECK(count_work(shape, true).min_bytes - count_work(shape).min_bytes == 200.0 * 4);
}

}  // namespace
}  // namespace attnbench
