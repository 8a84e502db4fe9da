// chunked_cuda's split-KV plan (variants/cuda/chunked_cuda_traits.h), checked on the host: the
// invariants every plan keeps for awkward shapes, the splits that fill an H200, the occupancy the
// plan aims at, and the causal horizon of a block of GQA rows.
#include "variants/cuda/chunked_cuda_traits.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

using testing::make_shape;

// The invariants every split plan must keep: whole tiles, no empty split, the splits cover
// [0, seq_kv) exactly once, within the split bounds.
void check_plan(const Shape& shape, int sm_count) {
  INFO(describe(shape) << ", " << sm_count << " SMs");
  const chunked_cuda::SplitPlan plan = chunked_cuda::plan_split_kv(shape, sm_count);
  CHECK(plan.rows_per_kv_head == shape.group_size() * shape.seq_q);
  CHECK((plan.rows_per_block == 4 || plan.rows_per_block == 16));
  CHECK(plan.row_blocks * plan.rows_per_block >= plan.rows_per_kv_head);
  CHECK((plan.row_blocks - 1) * plan.rows_per_block < plan.rows_per_kv_head);
  CHECK(plan.kv_tiles == launch::ceil_div(shape.seq_kv, chunked_cuda::kBlockKeys));
  CHECK(plan.num_splits >= 1);
  CHECK(plan.num_splits <= chunked_cuda::kMaxSplits);
  CHECK(plan.tiles_per_split >= 1);
  CHECK((plan.num_splits - 1) * plan.tiles_per_split < plan.kv_tiles);  // last split not empty
  CHECK(plan.num_splits * plan.tiles_per_split >= plan.kv_tiles);
  CHECK(plan.output_rows == shape.batch * shape.heads * shape.seq_q);
  CHECK(plan.grid_x == plan.row_blocks * plan.num_splits);
  CHECK(launch::grid_limit_problem(plan.grid_x, shape.kv_heads, shape.batch).empty());
  if (plan.num_splits > 1) {
    CHECK(plan.tiles_per_split * chunked_cuda::kBlockKeys >= chunked_cuda::kMinKeysPerSplit);
  }
  int64_t covered = 0;
  for (int64_t split = 0; split < plan.num_splits; ++split) {
    const int64_t begin = chunked_cuda::split_key_begin(split, plan.tiles_per_split);
    const int64_t end = chunked_cuda::split_key_end(split, plan.tiles_per_split, shape.seq_kv);
    CHECK(begin == covered);
    CHECK(end > begin);
    CHECK(begin % chunked_cuda::kBlockKeys == 0);
    covered = end;
  }
  CHECK(covered == shape.seq_kv);
  CHECK(chunked_cuda::split_workspace_bytes(plan, shape.d_v) ==
        (plan.num_splits > 1 ? plan.num_splits * plan.output_rows * (shape.d_v + 2) * 4 : 0));
}

TEST_CASE("split-KV plans for awkward shapes", "[cuda][launch]") {
  const Shape shapes[] = {
      make_shape(1, 1, 1, 1, 1, 16, 16, false),
      make_shape(1, 2, 2, 1, 1000, 64, 64, false),
      make_shape(1, 16, 16, 1, 131072, 128, 128, true),
      make_shape(4, 32, 8, 1, 131072, 128, 128, true),
      make_shape(1, 2, 2, 131, 131, 64, 64, false),
      make_shape(1, 2, 2, 45, 200, 64, 64, true),
      make_shape(1, 2, 2, 50, 70, 13, 13, false),
      make_shape(1, 2, 2, 65, 65, 48, 80, false),
      make_shape(2, 8, 2, 40, 96, 64, 64, false),
      make_shape(1, 4, 1, 70, 70, 32, 32, true),
      make_shape(1, 16, 16, 1000, 131072, 64, 64, true),
      make_shape(8, 16, 16, 16384, 16384, 128, 128, false),
  };
  for (const Shape& shape : shapes) {
    for (const int sm_count : {1, 108, 132}) check_plan(shape, sm_count);
  }
}

TEST_CASE("split-KV plan for 128k-key decode fills an H200", "[cuda][launch]") {
  const chunked_cuda::SplitPlan plan =
      chunked_cuda::plan_split_kv(make_shape(1, 16, 16, 1, 131072, 128, 128, true), 132);
  CHECK(plan.rows_per_block == 4);
  CHECK(plan.row_blocks == 1);
  CHECK(plan.kv_tiles == 4096);
  CHECK(plan.num_splits == 33);  // 16 heads x 33 splits = 528 blocks = 4 per SM
  CHECK(plan.tiles_per_split == 125);
  CHECK(plan.output_rows == 16);

  // GQA decode: the 8 query heads of a group share their kv head's blocks.
  const chunked_cuda::SplitPlan gqa =
      chunked_cuda::plan_split_kv(make_shape(1, 32, 4, 1, 131072, 128, 128, false), 132);
  CHECK(gqa.rows_per_kv_head == 8);
  CHECK(gqa.rows_per_block == 16);
  CHECK(gqa.row_blocks == 1);
  CHECK(gqa.num_splits == chunked_cuda::kMaxSplits);  // 4 kv heads would want 132 splits each

  // Short sequences are not split below 256 keys.
  CHECK(chunked_cuda::plan_split_kv(make_shape(1, 1, 1, 1, 1, 16, 16, false), 132).num_splits == 1);
  CHECK(chunked_cuda::plan_split_kv(make_shape(1, 2, 2, 1, 1000, 64, 64, false), 132).num_splits ==
        3);
  // Enough query blocks already fill the GPU: one split, no workspace.
  const chunked_cuda::SplitPlan prefill =
      chunked_cuda::plan_split_kv(make_shape(8, 16, 16, 16384, 16384, 128, 128, false), 132);
  CHECK(prefill.num_splits == 1);
  CHECK(chunked_cuda::split_workspace_bytes(prefill, 128) == 0);
}

TEST_CASE("split-KV plan fills the blocks the occupancy calculator says fit", "[cuda][launch]") {
  // d 64 decode: 16 heads on 132 SMs. At 4 blocks per SM: 33 splits; where 8 fit, 66.
  const Shape decode = make_shape(1, 16, 16, 1, 131072, 64, 64, true);
  CHECK(chunked_cuda::plan_split_kv(decode, 132).num_splits == 33);
  CHECK(chunked_cuda::plan_split_kv(decode, 132, chunked_cuda::kMinBlocksPerSm).num_splits == 33);
  const chunked_cuda::SplitPlan eight = chunked_cuda::plan_split_kv(decode, 132, 8);
  CHECK(eight.num_splits == 66);
  CHECK(eight.num_splits * eight.row_blocks * decode.kv_heads <= 8 * 132);
  CHECK(chunked_cuda::plan_split_kv(decode, 132, 12).num_splits ==
        98);  // 99 wanted, whole tiles: 98
  // The 256-keys-per-split floor and the split cap still hold.
  CHECK(chunked_cuda::plan_split_kv(make_shape(1, 2, 2, 1, 1000, 64, 64, false), 132, 12)
            .num_splits == 3);
  CHECK(chunked_cuda::plan_split_kv(make_shape(1, 1, 1, 1, 131072, 64, 64, false), 132, 12)
            .num_splits == chunked_cuda::kMaxSplits);
  for (const int blocks_per_sm : {0, 1, 7, 12}) {
    const chunked_cuda::SplitPlan plan = chunked_cuda::plan_split_kv(decode, 132, blocks_per_sm);
    CHECK(plan.num_splits >= 1);
    CHECK((plan.num_splits - 1) * plan.tiles_per_split < plan.kv_tiles);
  }
}

TEST_CASE("largest query position of a block of GQA rows", "[cuda][launch]") {
  struct Case {
    int64_t group, seq_q;
  };
  for (const Case c : {Case{1, 1}, Case{8, 1}, Case{4, 5}, Case{2, 40}, Case{1, 131}, Case{3, 7}}) {
    const int64_t rows = c.group * c.seq_q;
    for (const int64_t block_rows : {int64_t{4}, int64_t{16}}) {
      for (int64_t first = 0; first < rows; first += block_rows) {
        int64_t expected = 0;
        for (int64_t r = first; r < std::min(first + block_rows, rows); ++r) {
          expected = std::max(expected, r % c.seq_q);
        }
        INFO("group " << c.group << " seq_q " << c.seq_q << " rows " << first << "+" << block_rows);
        // Exact when the block stays in one head; seq_q - 1 (an upper bound) when it spans two.
        const int64_t got = chunked_cuda::max_query_position(first, block_rows, rows, c.seq_q);
        CHECK(got >= expected);
        CHECK(got <= c.seq_q - 1);
        if ((std::min(first + block_rows, rows) - 1) / c.seq_q == first / c.seq_q) {
          CHECK(got == expected);
        }
      }
    }
  }
}

}  // namespace
}  // namespace attnbench
