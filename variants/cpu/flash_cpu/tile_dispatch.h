// From run-time tile sizes to compiled register tiles. flash_cpu's micro-kernels are templates
// over their tile's rows and vectors, so that the accumulators are registers; a block's edges
// need smaller tiles than its body. dispatch_count and dispatch_tile call a kernel with run-time
// counts (1 .. the maxima) as compile-time constants: each caller writes one lambda naming its
// kernel, and every count in range reaches its own instance (a count out of range, none).
#pragma once

#include <type_traits>
#include <utility>

namespace attnbench::flash_cpu {

// kernel(std::integral_constant<int, count>{}) for a count in 1 .. kMax; nothing otherwise.
template <int kMax, class Kernel>
inline __attribute__((always_inline)) void dispatch_count(int count, Kernel&& kernel) {
  if constexpr (kMax > 0) {
    if (count == kMax) return kernel(std::integral_constant<int, kMax>{});
    dispatch_count<kMax - 1>(count, std::forward<Kernel>(kernel));
  }
}

// kernel(rows, vectors) as integral constants, for rows in 1 .. kMaxRows and vectors in
// 1 .. kMaxVectors.
template <int kMaxRows, int kMaxVectors, class Kernel>
inline __attribute__((always_inline)) void dispatch_tile(int rows, int vectors, Kernel&& kernel) {
  dispatch_count<kMaxRows>(rows, [&](auto row_count) {
    dispatch_count<kMaxVectors>(vectors,
                                [&](auto vector_count) { kernel(row_count, vector_count); });
  });
}

}  // namespace attnbench::flash_cpu
