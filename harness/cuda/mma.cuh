// The tensor-core instructions the bf16/fp16 kernels are written against (sm_80+): ldmatrix,
// mma.sync m16n8k16 with fp32 accumulators, and packing two fp32 values into one register of the
// 16-bit type. Device code only; include from .cu files. Where each fragment element lives is in
// mma_fragments.h, host-testable.
//
// The element types are tags: Bf16Mma and Fp16Mma carry the PTX type name and the packing, so a
// kernel templated on one of them compiles to the right instruction with no run-time switch.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "harness/core/dtype.h"

namespace attnbench::kernels {

// D = A B + D for one 16 x 8 x 16 product of 16-bit elements, PTX type `kType` ("bf16" or "f16");
// A in four registers, B in two, D in four floats. The type is part of the instruction's name, so
// it is spliced in as a literal, and both element types share this one statement.
#define ATTNBENCH_MMA_M16N8K16(kType, d, a, b0, b1)                                     \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." kType "." kType                 \
               ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                         \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))

// Two fp32 values as one pair of the 16-bit type, rounded to nearest even, `low` in the low half
// (the lower-numbered element); the pointer only picks the type.
__device__ __forceinline__ __nv_bfloat162 to_pair(float low, float high, const __nv_bfloat162*) {
  return __floats2bfloat162_rn(low, high);
}
__device__ __forceinline__ __half2 to_pair(float low, float high, const __half2*) {
  return __floats2half2_rn(low, high);
}

// The tag of one 16-bit element type, by its pair type (__nv_bfloat162 or __half2).
template <class Pair>
struct Mma16 {
  __device__ __forceinline__ static uint32_t pack(float low, float high) {
    const Pair pair = to_pair(low, high, static_cast<const Pair*>(nullptr));
    return *reinterpret_cast<const uint32_t*>(&pair);
  }
  __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (std::is_same_v<Pair, __nv_bfloat162>) {
      ATTNBENCH_MMA_M16N8K16("bf16", d, a, b0, b1);
    } else {
      ATTNBENCH_MMA_M16N8K16("f16", d, a, b0, b1);
    }
#else
    __trap();  // prepare() refuses GPUs below sm_80
#endif
  }
};

using Bf16Mma = Mma16<__nv_bfloat162>;
using Fp16Mma = Mma16<__half2>;

#undef ATTNBENCH_MMA_M16N8K16

// The tag of a 16-bit element type, for the launch sites that turn a run-time DType into one.
template <DType kDType>
struct MmaOf;
template <>
struct MmaOf<DType::bf16> {
  using type = Bf16Mma;
};
template <>
struct MmaOf<DType::fp16> {
  using type = Fp16Mma;
};

// Four 8 x 8 matrices of 16-bit elements from shared memory into this lane's four registers,
// each transposed on the way with kTranspose (a row-major operand read as column-major); this
// lane's row address is `address` (a 32-bit shared-memory address, __cvta_generic_to_shared).
// ".trans" is part of the instruction's name, so it is spliced in as a literal.
#define ATTNBENCH_LDMATRIX_X4(kTrans, r, address)                                             \
  asm volatile("ldmatrix.sync.aligned.m8n8.x4" kTrans ".shared.b16 {%0, %1, %2, %3}, [%4];\n" \
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])                               \
               : "r"(address))

template <bool kTranspose>
__device__ __forceinline__ void load_matrices_x4(uint32_t (&r)[4], unsigned address) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kTranspose) {
    ATTNBENCH_LDMATRIX_X4(".trans", r, address);
  } else {
    ATTNBENCH_LDMATRIX_X4("", r, address);
  }
#else
  r[0] = r[1] = r[2] = r[3] = 0;
  __trap();
#endif
}

#undef ATTNBENCH_LDMATRIX_X4

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], unsigned address) {
  load_matrices_x4<false>(r, address);
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], unsigned address) {
  load_matrices_x4<true>(r, address);
}

}  // namespace attnbench::kernels
