// chunked_cuda's tile geometry and split-KV plan (variants/cuda/chunked_cuda.cu), apart from the
// kernels so the host tests check them on a machine without a GPU: the threads and key tiles of a
// partial block, how many splits the keys are cut into and which keys each takes, the causal
// horizon of a block of GQA rows, and the shared memory and workspace that follow.
#pragma once

#include <algorithm>
#include <cstdint>

#include "harness/core/shape.h"
#include "harness/cuda/launch_math.h"

namespace attnbench::chunked_cuda {

constexpr int kThreads = 128;          // four warps
constexpr int kBlockKeys = 32;         // keys per K/V tile: one per lane
constexpr int kMinKeysPerSplit = 256;  // keys per split at least (the last may have fewer)
constexpr int kMaxSplits = 128;
// The partial kernel's __launch_bounds__ minimum: its registers are capped so that at least this
// many blocks are resident per SM. More fit where shared memory and registers allow (7-12 at
// d <= 64); chunked_cuda asks the occupancy calculator and plans for what it says.
constexpr int kMinBlocksPerSm = 4;

// Dynamic shared memory of the partial kernel for a d bucket and rows per block: Q [rows][d],
// K and V [32][d], P [rows][32], in floats.
constexpr int64_t partial_shared_bytes(int d_bucket_size, int rows) {
  return (int64_t{rows} * d_bucket_size + 2 * int64_t{kBlockKeys} * d_bucket_size +
          int64_t{rows} * kBlockKeys) *
         4;
}
static_assert(partial_shared_bytes(128, 16) <= 48 * 1024, "fits without an opt-in");

// The query rows that share one K/V head (the group's heads times seq_q) are processed together,
// so one pass over K/V serves every head of a GQA group. Row r of a kv head is query head
// kv_head * group + r / seq_q, position r % seq_q.
struct SplitPlan {
  int64_t rows_per_kv_head = 0;  // group * seq_q
  int rows_per_block = 0;        // 4 or 16
  int64_t row_blocks = 0;
  int64_t kv_tiles = 0;
  int64_t tiles_per_split = 0;
  int64_t num_splits = 0;
  int64_t output_rows = 0;  // batch * heads * seq_q: rows of O and of each split's partials
  int64_t grid_x = 0;       // row_blocks * num_splits; grid y = kv_heads, z = batch
};

// blocks_per_sm: how many partial blocks are resident on one SM (the occupancy calculator's
// answer for the kernel the shape launches); the splits aim to fill blocks_per_sm * sm_count.
inline SplitPlan plan_split_kv(const Shape& shape, int sm_count,
                               int blocks_per_sm = kMinBlocksPerSm) {
  SplitPlan plan;
  plan.rows_per_kv_head = shape.group_size() * shape.seq_q;
  plan.rows_per_block = plan.rows_per_kv_head <= 4 ? 4 : 16;
  plan.row_blocks = launch::ceil_div(plan.rows_per_kv_head, plan.rows_per_block);
  plan.kv_tiles = launch::ceil_div(shape.seq_kv, kBlockKeys);
  const int64_t base_blocks = shape.batch * shape.kv_heads * plan.row_blocks;
  const int64_t target_blocks = int64_t{std::max(blocks_per_sm, 1)} * std::max(sm_count, 1);
  int64_t splits = launch::ceil_div(target_blocks, base_blocks);
  splits = std::min(splits, shape.seq_kv / kMinKeysPerSplit);
  splits = std::min<int64_t>(splits, kMaxSplits);
  splits = std::max<int64_t>(splits, 1);
  // Whole tiles per split, and no empty split at the end.
  plan.tiles_per_split = launch::ceil_div(plan.kv_tiles, splits);
  plan.num_splits = launch::ceil_div(plan.kv_tiles, plan.tiles_per_split);
  plan.output_rows = shape.batch * shape.heads * shape.seq_q;
  plan.grid_x = plan.row_blocks * plan.num_splits;
  return plan;
}

// Keys [split_key_begin, split_key_end) belong to split `split`.
ATTNBENCH_HOST_DEVICE inline int64_t split_key_begin(int64_t split, int64_t tiles_per_split) {
  return split * tiles_per_split * kBlockKeys;
}
ATTNBENCH_HOST_DEVICE inline int64_t split_key_end(int64_t split, int64_t tiles_per_split,
                                                   int64_t seq_kv) {
  const int64_t end = (split + 1) * tiles_per_split * kBlockKeys;
  return end < seq_kv ? end : seq_kv;
}

// The largest query position among the rows [first_row, first_row + rows) of a kv head (clipped
// to rows_per_kv_head); position = row % seq_q. A block that spans two heads holds seq_q - 1.
ATTNBENCH_HOST_DEVICE inline int64_t max_query_position(int64_t first_row, int64_t rows,
                                                        int64_t rows_per_kv_head, int64_t seq_q) {
  const int64_t last_row =
      (first_row + rows < rows_per_kv_head ? first_row + rows : rows_per_kv_head) - 1;
  if (first_row / seq_q != last_row / seq_q) return seq_q - 1;
  return last_row % seq_q;
}

// Where the K (or V) rows of a launch live: the view's strides, and for a paged cache the block
// table (the pool page is the view's batch index, variant.h's KvPageTable). Ragged batches read
// each sequence's own length from kv_lens (null: every sequence holds seq_kv keys).
struct KvRows {
  int64_t batch_stride = 0, head_stride = 0, row_stride = 0;
  const int32_t* block_table = nullptr;  // null: contiguous
  int pages_per_sequence = 0, page_size = 0;
};

// The element offset of key `key`'s row of (sequence `batch`, `kv_head`): contiguous, or row
// key % page_size of the pool page the block table names for it.
ATTNBENCH_HOST_DEVICE inline int64_t kv_row_offset(const KvRows& rows, int batch, int kv_head,
                                                   int key) {
  if (rows.block_table == nullptr)
    return batch * rows.batch_stride + kv_head * rows.head_stride + key * rows.row_stride;
  const int page = rows.block_table[static_cast<int64_t>(batch) * rows.pages_per_sequence +
                                    key / rows.page_size];
  return page * rows.batch_stride + kv_head * rows.head_stride +
         (key % rows.page_size) * rows.row_stride;
}

// Bytes of workspace for the partials: max and sum per (split, output row), and the unnormalised
// accumulator of d_v floats. Nothing when there is one split (it writes O directly).
inline int64_t split_workspace_bytes(const SplitPlan& plan, int64_t d_v) {
  if (plan.num_splits <= 1) return 0;
  return plan.num_splits * plan.output_rows * (d_v + 2) * 4;
}

}  // namespace attnbench::chunked_cuda
