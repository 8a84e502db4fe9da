// The host-side arithmetic shared by the CUDA variants, kept apart from any CUDA runtime call so
// the tests can check it on a machine without a GPU: ceil_div, the d buckets, CUDA's grid limits,
// the causal key ranges (every mask's, for the fused kernels, are in mask_math.h), and the
// online-softmax and split-combine math (the kernels call these very functions, so the tests check
// what runs on the device). Each kernel's own tile geometry is in the traits header beside it
// (variants/cuda/*_traits.h).
//
// Scores in the kernels are in log2 units (Q is pre-multiplied by scale * log2(e)), so every
// exponential here is exp2 and every running max is a log2-domain max.
#pragma once

#include <math.h>

#include <algorithm>
#include <cstdint>
#include <string>

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
