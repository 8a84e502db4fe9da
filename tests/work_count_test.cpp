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

Shape masked(int64_t seq_q, int64_t seq_kv, MaskSpec mask) {
  Shape s = make_shape(1, 1, 1, seq_q, seq_kv, 8, 8, false);
  s.set_mask(std::move(mask));
  return s;
}

TEST_CASE("every mask counts its unmasked pairs, by hand", "[work][mask]") {
  // window:2, n = 6: rows see 1, 2, 3, 3, 3, 3 keys = 15 pairs.
  CHECK(count_work(masked(6, 6, MaskSpec::window(2))).pairs == 15);
  // window:0 is the diagonal alone.
  CHECK(count_work(masked(6, 6, MaskSpec::window(0))).pairs == 6);
  // window:1, seq_q 2 < seq_kv 5 (rows at keys 3 and 4): 2 + 2.
  CHECK(count_work(masked(2, 5, MaskSpec::window(1))).pairs == 4);
  // prefix:3, n = 5: rows see max(3, i + 1) keys = 3, 3, 3, 4, 5 = 18.
  CHECK(count_work(masked(5, 5, MaskSpec::prefix(3))).pairs == 18);
  // prefix:0 is causal.
  CHECK(count_work(masked(5, 5, MaskSpec::prefix(0))).pairs ==
        count_work(masked(5, 5, MaskSpec::causal())).pairs);
  // documents 2, 3: a causal triangle per document, 3 + 6 = 9.
  CHECK(count_work(masked(5, 5, MaskSpec::documents({2, 3}))).pairs == 9);
  // documents of length 1: only the diagonal.
  CHECK(count_work(masked(4, 4, MaskSpec::documents({1, 1, 1, 1}))).pairs == 4);
}

TEST_CASE("dense FLOPs and density sit beside the masked count", "[work][mask]") {
  const WorkCount window = count_work(masked(6, 6, MaskSpec::window(2)));
  CHECK(window.flops == 2.0 * 15 * 16);
  CHECK(window.dense_flops == 2.0 * 36 * 16);
  CHECK(window.density == Approx(15.0 / 36));
  CHECK(window.flop_convention == "window:2: unmasked pairs only");
  CHECK(count_work(masked(5, 5, MaskSpec::documents({2, 3}))).flop_convention ==
        "documents:2: unmasked pairs only");
  const WorkCount full = count_work(masked(6, 6, MaskSpec::none()));
  CHECK(full.density == 1);
  CHECK(full.dense_flops == full.flops);
  CHECK(count_work(masked(4, 4, MaskSpec::causal())).density == Approx(10.0 / 16));
  // The modifiers change no count.
  Shape modified = masked(6, 6, MaskSpec::window(2));
  modified.alibi = true;
  modified.softcap = 30;
  CHECK(count_work(modified).flops == window.flops);
}

TEST_CASE("d_k and d_v count separately, weights add to the bytes", "[work]") {
  const Shape shape = make_shape(1, 1, 1, 10, 20, 16, 32, false);
  CHECK(count_work(shape).flops == 2.0 * 200 * 48);
  CHECK(count_work(shape, true).min_bytes - count_work(shape).min_bytes == 200.0 * 4);
}

}  // namespace
}  // namespace attnbench
