// kVec consecutive floats from shared memory into registers in one load (a float4, a float2 or
// one float): the value-row read of the P V step that the fused and split-KV kernels share.
// Device code only; include from .cu files.
#pragma once

#include <cuda_runtime.h>

namespace attnbench::kernels {

// `source` must be aligned to kVec floats.
template <int kVec>
__device__ __forceinline__ void load_floats(const float* source, float (&out)[kVec]) {
  static_assert(kVec == 1 || kVec == 2 || kVec == 4, "one load holds 1, 2 or 4 floats");
  if constexpr (kVec == 4) {
    const float4 chunk = *reinterpret_cast<const float4*>(source);
    out[0] = chunk.x;
    out[1] = chunk.y;
    out[2] = chunk.z;
    out[3] = chunk.w;
  } else if constexpr (kVec == 2) {
    const float2 chunk = *reinterpret_cast<const float2*>(source);
    out[0] = chunk.x;
    out[1] = chunk.y;
  } else {
    out[0] = source[0];
  }
}

}  // namespace attnbench::kernels
