// The tile layer in plain C++ (tile_config.h has the interface): the same configuration, loads,
// stores and TDPBF16PS as AmxTiles, on a thread's own 8 tiles of 1 KiB, so code written against
// the layer runs, and is tested, on a CPU without AMX. It follows the Intel SDM's definition of
// each instruction:
// - a load reads the configured rows and bytes of each row and zeroes the rest of the tile;
// - TDPBF16PS, for each row m of C and each column n, for k = 0 .. K - 1 in order:
//     C[m][n] += A[m][2k] B[k][2n];  C[m][n] += A[m][2k + 1] B[k][2n + 1]
//   each bf16 widened to fp32 (a denormal read as 0), each product exact in fp32, each sum
//   rounded to nearest even, a denormal sum flushed to 0 (the hardware may round the pair's sum
//   once rather than twice: the tests that compare the two allow for that);
// - an operation whose tile shapes do not fit (the hardware's #UD), or any use before
//   configure(), throws std::logic_error.
// `Path` only names the instantiation: each translation unit that uses the layer gives its own
// (its SIMD path's type), so that no two objects compiled with different instruction sets share
// a copy of these functions (tests/build_checks/isa_symbols.sh).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "harness/simd/tile_config.h"

namespace attnbench::simd {

// Throws std::logic_error "tile emulation: tile <tile>: <problem>" (tile < 0: no tile named).
// Out of line, so that no path's object holds the std::string code it takes.
[[noreturn]] void throw_tile_misuse(int tile, const char* problem);

template <class Path>
struct TileEmulation {
  static void configure(const TileConfig& config) {
    if (config.palette != 1) throw_tile_misuse(-1, "only palette 1 exists");
    for (int t = 0; t < kTiles; ++t)
      if (config.rows[t] > kTileMaxRows || config.bytes_per_row[t] > kTileMaxBytes ||
          config.bytes_per_row[t] % 4 != 0)
        throw_tile_misuse(t, "configured larger than 16 rows x 64 bytes, or not whole words");
    State& s = state();
    s.config = config;
    s.configured = true;
    std::memset(s.data, 0, sizeof(s.data));
  }

  static void release() {
    State& s = state();
    s.configured = false;
    s.config = TileConfig{};
    std::memset(s.data, 0, sizeof(s.data));
  }

  template <int T>
  static void zero() {
    State& s = state();
    require(s, T);
    std::memset(s.data[T], 0, sizeof(s.data[T]));
  }

  template <int T>
  static void load(const void* base, int64_t stride) {
    State& s = state();
    require(s, T);
    std::memset(s.data[T], 0, sizeof(s.data[T]));
    const auto* source = static_cast<const unsigned char*>(base);
    for (int r = 0; r < s.config.rows[T]; ++r)
      std::memcpy(s.data[T] + r * kTileMaxBytes, source + r * stride, s.config.bytes_per_row[T]);
  }

  template <int T>
  static void store(void* base, int64_t stride) {
    State& s = state();
    require(s, T);
    auto* destination = static_cast<unsigned char*>(base);
    for (int r = 0; r < s.config.rows[T]; ++r)
      std::memcpy(destination + r * stride, s.data[T] + r * kTileMaxBytes,
                  s.config.bytes_per_row[T]);
  }

  template <int C, int A, int B>
  static void dot_bf16() {
    static_assert(C != A && C != B && A != B, "TDPBF16PS takes three different tiles");
    State& s = state();
    require(s, C);
    require(s, A);
    require(s, B);
    const TileConfig& config = s.config;
    const int rows = config.rows[C];                  // M
    const int columns = config.bytes_per_row[C] / 4;  // N
    const int depth = config.bytes_per_row[A] / 4;    // K pairs
    if (config.rows[A] != rows || config.rows[B] != depth ||
        config.bytes_per_row[B] != config.bytes_per_row[C])
      throw_tile_misuse(C, "TDPBF16PS into it from tiles whose shapes do not fit");
    for (int m = 0; m < rows; ++m)
      for (int n = 0; n < columns; ++n) {
        float c = word<float>(s.data[C], m, n);
        for (int k = 0; k < depth; ++k) {
          const uint32_t a = word<uint32_t>(s.data[A], m, k);
          const uint32_t b = word<uint32_t>(s.data[B], k, n);
          c = flush(c + widen(a & 0xFFFF) * widen(b & 0xFFFF));
          c = flush(c + widen(a >> 16) * widen(b >> 16));
        }
        std::memcpy(s.data[C] + m * kTileMaxBytes + n * 4, &c, sizeof(c));
      }
  }

 private:
  struct State {
    TileConfig config;
    bool configured = false;
    alignas(64) unsigned char data[kTiles][kTileMaxRows * kTileMaxBytes] = {};
  };

  static State& state() {
    static thread_local State s;
    return s;
  }

  static void require(const State& s, int tile) {
    if (!s.configured || s.config.rows[tile] == 0)
      throw_tile_misuse(tile, "used without a configuration that gives it rows");
  }

  // The 32-bit word `index` of row `row` of a tile.
  template <class Word>
  static Word word(const unsigned char* tile, int row, int index) {
    Word value;
    std::memcpy(&value, tile + row * kTileMaxBytes + index * 4, sizeof(value));
    return value;
  }

  // A bf16's bits as fp32; denormals (exponent 0) read as a signed zero.
  static float widen(uint32_t bits) {
    if ((bits & 0x7F80u) == 0) bits &= 0x8000u;
    const uint32_t wide = bits << 16;
    float value;
    std::memcpy(&value, &wide, sizeof(value));
    return value;
  }

  static float flush(float value) {
    return std::fpclassify(value) == FP_SUBNORMAL ? std::copysign(0.0f, value) : value;
  }
};

}  // namespace attnbench::simd
