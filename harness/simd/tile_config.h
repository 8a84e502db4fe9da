// The tile layer's shared part: the configuration both of its implementations take. A tile is a
// 2D register of up to 16 rows of 64 bytes (Intel AMX); a thread configures the rows and bytes
// per row of each of its 8 tiles at once (LDTILECFG's 64-byte operand, palette 1), and releases
// them when done. The layer has one interface (static functions of a struct) and two
// implementations, chosen by template argument: AmxTiles (amx_tiles.h, the hardware, compiled
// with -mamx-tile -mamx-bf16 and run only where CpuFeatures says amx_tile and amx_bf16) and
// TileEmulation (tile_emulation.h, the same operations in plain C++, for hosts without AMX):
//   configure(config)           the thread's tiles take these shapes (and start as zeros)
//   release()                   the thread gives its tiles back (TILERELEASE)
//   zero<T>()                   tile T := 0
//   load<T>(base, stride)       tile T := its rows from base, `stride` bytes apart
//   store<T>(base, stride)      tile T's rows to base, `stride` bytes apart
//   dot_bf16<C, A, B>()         TDPBF16PS: C (M x N fp32) += A (M x K bf16 pairs) B (K x N pairs)
// Tile numbers are template arguments because the instructions encode them; the hardware layer
// has the combinations the kernels use: accumulators C in tiles 0-3, A operands in 4-5, B
// operands in 6-7 (a 2 x 2 block of products per pair of loads).
#pragma once

#include <cstdint>

namespace attnbench::simd {

constexpr int kTiles = 8;
constexpr int kTileMaxRows = 16;
constexpr int kTileMaxBytes = 64;  // per row: 16 fp32, or 32 bf16 (16 pairs)

// LDTILECFG's operand, byte for byte.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};  // tiles 0-7; the rest stay 0
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64, "LDTILECFG reads 64 bytes");

}  // namespace attnbench::simd
