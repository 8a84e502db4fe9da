// flash_tc's tile geometry (variants/cuda/flash_tc.cu), apart from the kernel so the host tests
// (the fragment tests and the host emulation of the kernel) use the very same numbers: four warps
// of one m16 tile of query rows each, 64-key tiles of K and V two stages deep, and the dynamic
// shared memory and occupancy that follow for d 64 and 128. Where each fragment element lives is
// harness/cuda/mma_fragments.h.
#pragma once

#include <cstdint>

namespace attnbench::flash_tc {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kWarpRows = 16;                   // one m16 tile of query rows per warp
constexpr int kBlockRows = kWarps * kWarpRows;  // 64 query rows per block
constexpr int kBlockKeys = 64;                  // keys per K/V tile: eight n8 blocks of S

// __launch_bounds__'s minimum of blocks per SM: three at d 64 (168 registers, 40 KiB), two at
// d 128 (every register a thread may have, 80 KiB).
constexpr int min_blocks_per_sm(int d) { return d == 64 ? 3 : 2; }

// Whether the scores are multiplied by scale·log2(e) first, one FMUL each, as soft-capping and
// ALiBi need. Otherwise the scale is folded into the exponent's one FFMA, exp2(s·scale - max),
// the max taken over the unscaled scores and scaled once: that is only the max of the scaled
// scores (and masked keys, -inf, only stay -inf) when the scale is positive.
constexpr bool scores_scaled_first(bool modifiers, float scale_log2) {
  return modifiers || !(scale_log2 > 0.0f);
}

// Dynamic shared memory: the Q tile (reused to stage O) and two stages each of K and V.
constexpr int64_t shared_bytes(int d) {
  return (int64_t{kBlockRows} + 4 * int64_t{kBlockKeys}) * d * 2;
}

}  // namespace attnbench::flash_tc
