// fused's tile geometry (variants/cuda/fused.cu), apart from the kernel so the host tests check it
// on a machine without a GPU: the thread grid, the rows and keys of a tile, the launch grid and the
// dynamic shared memory, all derived from the d bucket the kernel is instantiated for.
#pragma once

#include <cstdint>

#include "harness/core/shape.h"
#include "harness/cuda/launch_math.h"

namespace attnbench::fused {

constexpr int kThreads = 256;       // a 16 x 16 grid of threads
constexpr int kMinBlocksPerSm = 2;  // __launch_bounds__: caps the registers at 128
constexpr int kBlockRows = 64;      // query rows per block: 16 row groups of 4
constexpr int kBlockKeys = 64;      // keys per K/V tile: 16 key groups of 4

// One block per (query block, head, batch).
struct Grid {
  int64_t query_blocks = 0;  // grid x
  int64_t heads = 0;         // grid y
  int64_t batch = 0;         // grid z
};

inline Grid grid(const Shape& shape) {
  return {launch::ceil_div(shape.seq_q, kBlockRows), shape.heads, shape.batch};
}

// Dynamic shared memory for a d bucket: Qᵀ [d][64], K [64][d], V [64][d], P [64][64], in floats.
constexpr int64_t shared_bytes(int d_bucket_size) {
  return (3 * int64_t{d_bucket_size} * kBlockRows + int64_t{kBlockRows} * kBlockKeys) * 4;
}

}  // namespace attnbench::fused
