// Stages on the per-row online-softmax state a kernel keeps in registers (running max, the
// thread's share of the running sum, the unnormalised accumulator): starting it, rescaling a row
// when its max grows, and reducing a row's value over the lanes that hold it. The fused kernel is
// built from them; the split-KV kernel (chunked_cuda.cu, built from stages of its own) starts
// from start_online_softmax and keeps its rescale and lane reductions written out, as they were
// when its registers were measured (moving its code around has cost it registers before). The
// per-tile update itself (launch::online_step) is in harness/cuda/launch_math.h, where the
// host-side emulation tests reach it. Device code only; include from .cu files.
#pragma once

#include <cuda_runtime.h>
#include <math.h>

namespace attnbench::kernels {

// Every row starts with no key seen: max -inf (the first tile's alpha is then exp2(-inf) = 0),
// sum 0 and a zero accumulator.
template <int kRows, int kCols>
__device__ __forceinline__ void start_online_softmax(float (&row_max)[kRows],
                                                     float (&row_sum)[kRows],
                                                     float (&acc)[kRows][kCols]) {
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    row_max[i] = -INFINITY;
    row_sum[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[i][c] = 0.0f;
  }
}

// A row's accumulator was summed against the old max: alpha = exp2(old max - new max) brings it
// to the new one.
template <int kCols>
__device__ __forceinline__ void rescale_row(float (&acc_row)[kCols], float alpha) {
#pragma unroll
  for (int c = 0; c < kCols; ++c) acc_row[c] *= alpha;
}

// Butterfly reduction over the lanes whose index differs only in the bits kFirstMask ..
// kLastMask (powers of two, walked from the first to the last): every one of those lanes ends
// with the result. The walking order is the caller's, so each kernel keeps its own shuffle order.
template <int kFirstMask, int kLastMask, class Combine>
__device__ __forceinline__ float reduce_over_lanes(float value, Combine combine) {
  constexpr bool kUp = kFirstMask <= kLastMask;
  constexpr int kSteps = [] {
    int steps = 1;
    for (int mask = kFirstMask; mask != kLastMask; mask = kUp ? mask << 1 : mask >> 1) ++steps;
    return steps;
  }();
#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    const int lane_mask = kUp ? kFirstMask << step : kFirstMask >> step;
    value = combine(value, __shfl_xor_sync(0xffffffffu, value, lane_mask));
  }
  return value;
}

template <int kFirstMask, int kLastMask>
__device__ __forceinline__ float lanes_max(float value) {
  return reduce_over_lanes<kFirstMask, kLastMask>(value,
                                                  [](float a, float b) { return fmaxf(a, b); });
}

template <int kFirstMask, int kLastMask>
__device__ __forceinline__ float lanes_sum(float value) {
  return reduce_over_lanes<kFirstMask, kLastMask>(value, [](float a, float b) { return a + b; });
}

}  // namespace attnbench::kernels
