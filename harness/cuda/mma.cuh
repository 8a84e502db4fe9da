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

#include "harness/core/dtype.h"

namespace attnbench::kernels {

// D = A B + D for one 16 x 8 x 16 product of 16-bit elements, PTX type `kType` ("bf16" or "f16");
// A in four registers, B in two, D in four floats. The type is part of the instruction's name, so
// it is spliced in as a literal, and the two tags below share this one statement.
#define ATTNBENCH_MMA_M16N8K16(kType, d, a, b0, b1)                                     \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." kType "." kType                 \
               ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                         \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))

struct Bf16Mma {
  // Two fp32 values rounded to nearest even, `low` in the low half (the lower-numbered element).
  __device__ __forceinline__ static uint32_t pack(float low, float high) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
    return *reinterpret_cast<const uint32_t*>(&pair);
  }
  __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    ATTNBENCH_MMA_M16N8K16("bf16", d, a, b0, b1);
#else
    __trap();  // prepare() refuses GPUs below sm_80
#endif
  }
};

struct Fp16Mma {
  __device__ __forceinline__ static uint32_t pack(float low, float high) {
    const __half2 pair = __floats2half2_rn(low, high);
    return *reinterpret_cast<const uint32_t*>(&pair);
  }
  __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    ATTNBENCH_MMA_M16N8K16("f16", d, a, b0, b1);
#else
    __trap();
#endif
  }
};

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

// Four 8 x 8 matrices of 16-bit elements from shared memory; this lane's row address is `address`
// (a 32-bit shared-memory address, __cvta_generic_to_shared).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], unsigned address) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#else
  r[0] = r[1] = r[2] = r[3] = 0;
  __trap();
#endif
}

// The same, each matrix transposed on the way (a row-major operand read as column-major).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], unsigned address) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#else
  r[0] = r[1] = r[2] = r[3] = 0;
  __trap();
#endif
}

}  // namespace attnbench::kernels
