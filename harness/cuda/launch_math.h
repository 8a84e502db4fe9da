// The host-side arithmetic of the CUDA variants, kept apart from any CUDA runtime call so the tests
// can check it on a machine without a GPU: tile counts, grid sizes, the split-KV plan, the causal
// key ranges (every mask's, for the fused kernels, are in mask_math.h), and the online-softmax and
// split-combine math (the kernels call these very
// functions, so the tests check what runs on the device).
//
// Scores in the kernels are in log2 units (Q is pre-multiplied by scale * log2(e)), so every
// exponential here is exp2 and every running max is a log2-domain max.
#pragma once

#include <math.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "harness/core/shape.h"

#if defined(__CUDACC__)
#define ATTNBENCH_HOST_DEVICE __host__ __device__
#else
#define ATTNBENCH_HOST_DEVICE
#endif

namespace attnbench::launch {

constexpr float kLog2e = 1.4426950408889634f;

ATTNBENCH_HOST_DEVICE constexpr int64_t ceil_div(int64_t numerator, int64_t denominator) {
  return (numerator + denominator - 1) / denominator;
}

// Keys [0, result) that query row `row` sees. The causal mask is aligned to the end: row i sees
// keys 0 .. i + (seq_kv - seq_q). Clamped to [0, seq_kv], so padding rows past seq_q are harmless.
ATTNBENCH_HOST_DEVICE inline int64_t visible_keys(int64_t row, int64_t seq_q, int64_t seq_kv,
                                                  bool causal) {
  if (!causal) return seq_kv;
  const int64_t visible = row + (seq_kv - seq_q) + 1;
  return visible < 0 ? 0 : (visible > seq_kv ? seq_kv : visible);
}

// The head-dimension bucket a kernel is compiled for: the smallest of 32, 64, 128 holding both
// d_k and d_v (the remainder is read as zeros), or 0 when d is too large.
inline int d_bucket(int64_t d_k, int64_t d_v) {
  const int64_t d = std::max(d_k, d_v);
  if (d <= 32) return 32;
  if (d <= 64) return 64;
  if (d <= 128) return 128;
  return 0;
}

// CUDA's grid limits: x up to 2^31 - 1, y and z up to 65535. Empty when the grid fits.
inline std::string grid_limit_problem(int64_t x, int64_t y, int64_t z) {
  if (x < 1 || y < 1 || z < 1) return "empty grid";
  if (x > 2147483647 || y > 65535 || z > 65535) {
    return "grid " + std::to_string(x) + " x " + std::to_string(y) + " x " + std::to_string(z) +
           " exceeds CUDA's limits (2^31-1 x 65535 x 65535)";
  }
  return {};
}

// --- fused: one block per (query block, head, batch) ---------------------------------------------

constexpr int kFusedThreads = 256;   // a 16 x 16 grid of threads
constexpr int kFusedBlockRows = 64;  // query rows per block: 16 row groups of 4
constexpr int kFusedBlockKeys = 64;  // keys per K/V tile: 16 key groups of 4

struct FusedGeometry {
  int64_t query_blocks = 0;  // grid x
  int64_t heads = 0;         // grid y
  int64_t batch = 0;         // grid z
};

inline FusedGeometry fused_geometry(const Shape& shape) {
  return {ceil_div(shape.seq_q, kFusedBlockRows), shape.heads, shape.batch};
}

// Dynamic shared memory of the fused kernel for a d bucket: Qᵀ [d][64], K [64][d], V [64][d],
// P [64][64], in floats.
constexpr int64_t fused_shared_bytes(int d_bucket_size) {
  return (3 * int64_t{d_bucket_size} * kFusedBlockRows +
          int64_t{kFusedBlockRows} * kFusedBlockKeys) *
         4;
}

// --- chunked_cuda: split-KV (flash-decoding) ----------------------------------------------------

constexpr int kSplitThreads = 128;     // four warps
constexpr int kSplitBlockKeys = 32;    // keys per K/V tile: one per lane
constexpr int kMinKeysPerSplit = 256;  // keys per split at least (the last may have fewer)
constexpr int kMaxSplits = 128;
// The partial kernel's __launch_bounds__ minimum: its registers are capped so that at least this
// many blocks are resident per SM. More fit where shared memory and registers allow (7-12 at
// d <= 64); chunked_cuda asks the occupancy calculator and plans for what it says.
constexpr int kSplitMinBlocksPerSm = 4;

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
                               int blocks_per_sm = kSplitMinBlocksPerSm) {
  SplitPlan plan;
  plan.rows_per_kv_head = shape.group_size() * shape.seq_q;
  plan.rows_per_block = plan.rows_per_kv_head <= 4 ? 4 : 16;
  plan.row_blocks = ceil_div(plan.rows_per_kv_head, plan.rows_per_block);
  plan.kv_tiles = ceil_div(shape.seq_kv, kSplitBlockKeys);
  const int64_t base_blocks = shape.batch * shape.kv_heads * plan.row_blocks;
  const int64_t target_blocks = int64_t{std::max(blocks_per_sm, 1)} * std::max(sm_count, 1);
  int64_t splits = ceil_div(target_blocks, base_blocks);
  splits = std::min(splits, shape.seq_kv / kMinKeysPerSplit);
  splits = std::min<int64_t>(splits, kMaxSplits);
  splits = std::max<int64_t>(splits, 1);
  // Whole tiles per split, and no empty split at the end.
  plan.tiles_per_split = ceil_div(plan.kv_tiles, splits);
  plan.num_splits = ceil_div(plan.kv_tiles, plan.tiles_per_split);
  plan.output_rows = shape.batch * shape.heads * shape.seq_q;
  plan.grid_x = plan.row_blocks * plan.num_splits;
  return plan;
}

// Keys [split_key_begin, split_key_end) belong to split `split`.
ATTNBENCH_HOST_DEVICE inline int64_t split_key_begin(int64_t split, int64_t tiles_per_split) {
  return split * tiles_per_split * kSplitBlockKeys;
}
ATTNBENCH_HOST_DEVICE inline int64_t split_key_end(int64_t split, int64_t tiles_per_split,
                                                   int64_t seq_kv) {
  const int64_t end = (split + 1) * tiles_per_split * kSplitBlockKeys;
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

// Bytes of workspace for the partials: max and sum per (split, output row), and the unnormalised
// accumulator of d_v floats. Nothing when there is one split (it writes O directly).
inline int64_t split_workspace_bytes(const SplitPlan& plan, int64_t d_v) {
  if (plan.num_splits <= 1) return 0;
  return plan.num_splits * plan.output_rows * (d_v + 2) * 4;
}

// --- the softmax math, shared by kernels and tests ----------------------------------------------

// One step of the online softmax: the running max becomes `max`; the old accumulator and sum are
// multiplied by `alpha`; new exponentials are exp2(score - base). While nothing has been seen the
// max is -inf and base is 0, so exp2(-inf - base) gives 0 instead of NaN.
struct OnlineStep {
  float max;
  float base;
  float alpha;
};

ATTNBENCH_HOST_DEVICE inline OnlineStep online_step(float running_max, float tile_max) {
  OnlineStep step;
  step.max = fmaxf(running_max, tile_max);
  step.base = step.max == -INFINITY ? 0.0f : step.max;
  step.alpha = exp2f(running_max - step.base);
  return step;
}

// A partial softmax over some keys: its (log2-domain) max and Σ exp2(x - max).
struct SoftmaxState {
  float max;
  float sum;
};

// The state of the union of two disjoint key sets. Either may be empty (max -inf, sum 0).
ATTNBENCH_HOST_DEVICE inline SoftmaxState merge_states(SoftmaxState a, SoftmaxState b) {
  const float max = fmaxf(a.max, b.max);
  if (max == -INFINITY) return {max, 0.0f};
  const float a_part = a.max == -INFINITY ? 0.0f : a.sum * exp2f(a.max - max);
  const float b_part = b.max == -INFINITY ? 0.0f : b.sum * exp2f(b.max - max);
  return {max, a_part + b_part};
}

// Combining split-KV partials. Split s saw a (log2-domain) max m_s, a sum l_s = Σ exp2(x - m_s)
// and an accumulator a_s = Σ exp2(x - m_s) v over its keys. With M = max_s m_s:
//   o = Σ_s exp2(m_s - M) a_s / Σ_s exp2(m_s - M) l_s.
// A split that saw no key (m_s = -inf) contributes nothing.
struct SplitStats {
  float max;      // M
  float inv_sum;  // 1 / Σ_s exp2(m_s - M) l_s, or 0 when no split saw a key
};

// maxes[s * stride] and sums[s * stride] are split s's m and l for one output row.
ATTNBENCH_HOST_DEVICE inline SplitStats combine_stats(const float* maxes, const float* sums,
                                                      int64_t num_splits, int64_t stride) {
  float global_max = -INFINITY;
  for (int64_t s = 0; s < num_splits; ++s) global_max = fmaxf(global_max, maxes[s * stride]);
  float total = 0.0f;
  if (global_max != -INFINITY) {
    for (int64_t s = 0; s < num_splits; ++s) {
      const float m = maxes[s * stride];
      if (m != -INFINITY) total += exp2f(m - global_max) * sums[s * stride];
    }
  }
  return {global_max, total > 0.0f ? 1.0f / total : 0.0f};
}

// The factor split s's accumulator is multiplied by.
ATTNBENCH_HOST_DEVICE inline float split_weight(float split_max, SplitStats stats) {
  return split_max == -INFINITY ? 0.0f : exp2f(split_max - stats.max) * stats.inv_sum;
}

// One output element: Σ_s split_weight(m_s) a_s[column], with maxes[s * max_stride] and the
// column's accumulators at accs[s * acc_stride].
ATTNBENCH_HOST_DEVICE inline float combine_value(const float* maxes, int64_t max_stride,
                                                 const float* accs, int64_t acc_stride,
                                                 int64_t num_splits, SplitStats stats) {
  float out = 0.0f;
  for (int64_t s = 0; s < num_splits; ++s) {
    const float weight = split_weight(maxes[s * max_stride], stats);
    if (weight != 0.0f) out += weight * accs[s * acc_stride];
  }
  return out;
}

}  // namespace attnbench::launch
