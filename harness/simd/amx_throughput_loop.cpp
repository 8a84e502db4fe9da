// The AMX throughput loop (throughput_loops.h): TDPBF16PS on tiles already loaded, in a
// translation unit of its own, compiled with -mamx-tile -mamx-bf16 (CMakeLists.txt), so that no
// other code of the harness is compiled for AMX. It runs only where CpuFeatures has amx_bf16
// (which includes Linux's permission for the tile state); elsewhere it returns 0 at once.
#include "harness/simd/throughput_loops.h"

#if defined(__x86_64__) && (defined(__AMX_TILE__) || defined(__AMXTILE__)) && \
    (defined(__AMX_BF16__) || defined(__AMXBF16__))
#define ATTNBENCH_AMX_LOOP 1
#include "harness/simd/amx_tiles.h"
#endif

namespace attnbench {

#if defined(ATTNBENCH_AMX_LOOP)
namespace {

// Four accumulator tiles, each its own dependency chain (one chain loses about a quarter of the
// rate to TDPBF16PS's latency), fed by two A and two B tiles loaded once: the tile unit's rate
// with no memory traffic. A holds bf16 1.0, B bf16 6e-8: the sums grow slowly and stay finite.
double amx_loop(int64_t steps) {
  using Tiles = simd::AmxTiles;
  simd::TileConfig config;
  for (int t = 0; t < simd::kTiles; ++t) {
    config.rows[t] = simd::kTileMaxRows;
    config.bytes_per_row[t] = simd::kTileMaxBytes;
  }
  alignas(64) uint16_t ones[simd::kTileMaxRows * simd::kTileMaxBytes / 2];
  alignas(64) uint16_t tiny[simd::kTileMaxRows * simd::kTileMaxBytes / 2];
  for (auto& value : ones) value = 0x3F80;
  for (auto& value : tiny) value = 0x3380;
  Tiles::configure(config);
  Tiles::zero<0>();
  Tiles::zero<1>();
  Tiles::zero<2>();
  Tiles::zero<3>();
  Tiles::load<4>(ones, simd::kTileMaxBytes);
  Tiles::load<5>(ones, simd::kTileMaxBytes);
  Tiles::load<6>(tiny, simd::kTileMaxBytes);
  Tiles::load<7>(tiny, simd::kTileMaxBytes);
  for (int64_t step = 0; step < steps; ++step) {
    Tiles::dot_bf16<0, 4, 6>();
    Tiles::dot_bf16<1, 4, 7>();
    Tiles::dot_bf16<2, 5, 6>();
    Tiles::dot_bf16<3, 5, 7>();
  }
  alignas(64) float out[4][simd::kTileMaxRows * simd::kTileMaxBytes / 4];
  Tiles::store<0>(out[0], simd::kTileMaxBytes);
  Tiles::store<1>(out[1], simd::kTileMaxBytes);
  Tiles::store<2>(out[2], simd::kTileMaxBytes);
  Tiles::store<3>(out[3], simd::kTileMaxBytes);
  Tiles::release();
  return static_cast<double>(out[0][0] + out[1][0] + out[2][0] + out[3][0]);
}

}  // namespace
#endif

double run_amx_bf16_loop(const CpuFeatures& features, int64_t steps, double& flops_per_step) {
  flops_per_step = 0;
#if defined(ATTNBENCH_AMX_LOOP)
  if (features.amx_tile && features.amx_bf16) {
    // 4 tiles x 16 x 16 outputs x 32 products x 2 FLOPs.
    flops_per_step = 4.0 * 16 * 16 * 32 * 2;
    return amx_loop(steps);
  }
#else
  static_cast<void>(steps);
#endif
  static_cast<void>(features);
  return 0;
}

}  // namespace attnbench
