// Asynchronous global-to-shared copies (cp.async, sm_80+) and the K/V tile loader shared by the
// fused and split-KV kernels. Device code only; include from .cu files.
//
// A tile is `kRows` rows of d elements, `row_stride` floats apart in global memory (d in bhsd,
// heads * d in bshd) or wherever a row-address function says (a paged cache), stored in shared
// memory as [kRows][D] (D the kernel's d bucket). Rows past `rows_valid` and columns past `d` are
// written as zeros, so a tail tile or a d that is not a multiple of the bucket needs no special
// case in the math (a NaN left in shared memory would poison a 0 * x product).
//
// With kSwizzle, the 16-byte chunk c of row r is stored at chunk c ^ (r & 7): eight consecutive
// rows read at the same chunk then hit eight different bank groups, so a warp reading one float4
// from each of 32 rows has no bank conflict (D is a multiple of 32 floats, so without the swizzle
// every row would start in bank 0).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace attnbench::kernels {

// The float index of element (row, column) in a [rows][D] shared tile.
template <int D, bool kSwizzle>
__device__ __forceinline__ int tile_index(int row, int column) {
  if (!kSwizzle) return row * D + column;
  return row * D + ((((column >> 2) ^ (row & 7)) << 2) | (column & 3));
}

// Copies 16 (or 4) bytes, or writes zeros when !valid (src-size 0: nothing is read).
__device__ __forceinline__ void cp_async_16(float* shared, const float* global, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global),
               "r"(valid ? 16 : 0)
               : "memory");
#else
  *reinterpret_cast<float4*>(shared) =
      valid ? *reinterpret_cast<const float4*>(global) : make_float4(0.f, 0.f, 0.f, 0.f);
#endif
}

// The same for any 16 bytes (eight bf16 or fp16 values), to a 32-bit shared-memory address
// (__cvta_generic_to_shared): kernels that keep many tile addresses live hold them in one
// register each instead of a 64-bit generic pointer.
__device__ __forceinline__ void cp_async_16_bytes(unsigned shared_address, const void* global,
                                                  bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address), "l"(global),
               "r"(valid ? 16 : 0)
               : "memory");
#else
  __trap();  // only the sm_80+ kernels call it
#endif
}

__device__ __forceinline__ void cp_async_4(float* shared, const float* global, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(address), "l"(global),
               "r"(valid ? 4 : 0)
               : "memory");
#else
  *shared = valid ? *global : 0.0f;
#endif
}

// Closes the group of copies issued since the last commit (an empty group is allowed).
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most `kPending` of this thread's committed groups are still in flight. Other
// threads' copies are visible only after a __syncthreads() that follows.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

// The two-stage pipeline's hand-over: commits the copies just issued (a possibly empty group, so
// every thread counts the same groups), waits until only that newest group may still be in
// flight, then a barrier makes the older group's tile, copied by every thread, visible to all.
__device__ __forceinline__ void commit_and_land_older_tile() {
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();
}

// Issues the copies of one tile: rows [0, rows_valid) and columns [0, d) into `tile` ([kRows][D],
// swizzled or not), zeros elsewhere. Row r is read at row_address(r) (a paged cache finds each
// row through its block table); `readable` is an address cp.async may be given for the rows and
// columns it does not read. `vectorized` means every row starts 16-byte aligned and d is a
// multiple of 4 (AttentionParams' aligned rows), so whole float4 chunks are copied.
template <int kRows, int D, int kThreads, bool kSwizzle, class RowAddress>
__device__ __forceinline__ void load_rows_async(float* tile, RowAddress row_address,
                                                const float* readable, int rows_valid, int d,
                                                bool vectorized, int thread) {
  static_assert((kRows * D) % (4 * kThreads) == 0, "the tile must split evenly over the threads");
  if (vectorized) {
    constexpr int kChunksPerRow = D / 4;
    const int chunks_valid = d / 4;
#pragma unroll
    for (int i = 0; i < kRows * kChunksPerRow / kThreads; ++i) {
      const int id = thread + i * kThreads;
      const int row = id / kChunksPerRow, chunk = id % kChunksPerRow;
      const bool valid = row < rows_valid && chunk < chunks_valid;
      const float* from = valid ? row_address(row) + chunk * 4 : readable;
      cp_async_16(tile + tile_index<D, kSwizzle>(row, chunk * 4), from, valid);
    }
  } else {
#pragma unroll 4
    for (int i = 0; i < kRows * D / kThreads; ++i) {
      const int id = thread + i * kThreads;
      const int row = id / D, column = id % D;
      const bool valid = row < rows_valid && column < d;
      const float* from = valid ? row_address(row) + column : readable;
      cp_async_4(tile + tile_index<D, kSwizzle>(row, column), from, valid);
    }
  }
}

// The same for rows `row_stride` floats apart from `source`, which must point at a readable
// element even when rows_valid is 0 (nothing is read then).
template <int kRows, int D, int kThreads, bool kSwizzle>
__device__ __forceinline__ void load_tile_async(float* tile, const float* source, int row_stride,
                                                int rows_valid, int d, bool vectorized,
                                                int thread) {
  load_rows_async<kRows, D, kThreads, kSwizzle>(
      tile, [=](int row) { return source + static_cast<int64_t>(row) * row_stride; }, source,
      rows_valid, d, vectorized, thread);
}

}  // namespace attnbench::kernels
