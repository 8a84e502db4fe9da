// The tile layer on the hardware (tile_config.h has the interface): Intel AMX through the
// <immintrin.h> intrinsics. Only for translation units compiled with -mamx-tile -mamx-bf16, and
// only to be run where CpuFeatures has amx_tile and amx_bf16 (which also means Linux granted the
// tile state): on any other CPU the first instruction faults.
#pragma once

// GCC spells the macros __AMX_TILE__ and __AMX_BF16__, clang 14 __AMXTILE__ and __AMXBF16__.
#if !(defined(__AMX_TILE__) || defined(__AMXTILE__)) || \
    !(defined(__AMX_BF16__) || defined(__AMXBF16__))
#error "amx_tiles.h needs -mamx-tile -mamx-bf16"
#endif

#include <immintrin.h>

#include <cstdint>

#include "harness/simd/tile_config.h"

namespace attnbench::simd {

struct AmxTiles {
  // GCC 12's _tile_loadconfig declares an 8-byte operand ("m" of a pointer), so the compiler may
  // drop the stores that fill the other 56 bytes of a config on the stack and LDTILECFG then
  // faults on a garbage config: the operand here is the whole 64-byte struct.
  static void configure(const TileConfig& config) {
    __asm__ volatile("ldtilecfg %0" ::"m"(config));
  }
  static void release() { _tile_release(); }

  // GCC's intrinsics are macros that paste the tile number into the instruction's text, so each
  // number is spelled out; its tile loads are asm statements without a memory clobber, so a
  // compiler barrier first makes the stores before them (the packed operands) land in memory.
  template <int T>
  static void zero() {
    static_assert(T >= 0 && T < kTiles, "tiles are numbered 0-7");
    if constexpr (T == 0) _tile_zero(0);
    if constexpr (T == 1) _tile_zero(1);
    if constexpr (T == 2) _tile_zero(2);
    if constexpr (T == 3) _tile_zero(3);
    if constexpr (T == 4) _tile_zero(4);
    if constexpr (T == 5) _tile_zero(5);
    if constexpr (T == 6) _tile_zero(6);
    if constexpr (T == 7) _tile_zero(7);
  }

  template <int T>
  static void load(const void* base, int64_t stride) {
    static_assert(T >= 0 && T < kTiles, "tiles are numbered 0-7");
    __asm__ volatile("" ::: "memory");
    if constexpr (T == 0) _tile_loadd(0, base, stride);
    if constexpr (T == 1) _tile_loadd(1, base, stride);
    if constexpr (T == 2) _tile_loadd(2, base, stride);
    if constexpr (T == 3) _tile_loadd(3, base, stride);
    if constexpr (T == 4) _tile_loadd(4, base, stride);
    if constexpr (T == 5) _tile_loadd(5, base, stride);
    if constexpr (T == 6) _tile_loadd(6, base, stride);
    if constexpr (T == 7) _tile_loadd(7, base, stride);
  }

  template <int T>
  static void store(void* base, int64_t stride) {
    static_assert(T >= 0 && T < kTiles, "tiles are numbered 0-7");
    if constexpr (T == 0) _tile_stored(0, base, stride);
    if constexpr (T == 1) _tile_stored(1, base, stride);
    if constexpr (T == 2) _tile_stored(2, base, stride);
    if constexpr (T == 3) _tile_stored(3, base, stride);
    if constexpr (T == 4) _tile_stored(4, base, stride);
    if constexpr (T == 5) _tile_stored(5, base, stride);
    if constexpr (T == 6) _tile_stored(6, base, stride);
    if constexpr (T == 7) _tile_stored(7, base, stride);
    __asm__ volatile("" ::: "memory");
  }

  template <int C, int A, int B>
  static void dot_bf16() {
    static_assert(C >= 0 && C < 4 && (A == 4 || A == 5) && (B == 6 || B == 7),
                  "accumulators are tiles 0-3, A operands 4-5, B operands 6-7");
#define ATTNBENCH_TILE_DOT(c, a, b) \
  if constexpr (C == c && A == a && B == b) _tile_dpbf16ps(c, a, b);
    ATTNBENCH_TILE_DOT(0, 4, 6)
    ATTNBENCH_TILE_DOT(0, 4, 7)
    ATTNBENCH_TILE_DOT(0, 5, 6)
    ATTNBENCH_TILE_DOT(0, 5, 7)
    ATTNBENCH_TILE_DOT(1, 4, 6)
    ATTNBENCH_TILE_DOT(1, 4, 7)
    ATTNBENCH_TILE_DOT(1, 5, 6)
    ATTNBENCH_TILE_DOT(1, 5, 7)
    ATTNBENCH_TILE_DOT(2, 4, 6)
    ATTNBENCH_TILE_DOT(2, 4, 7)
    ATTNBENCH_TILE_DOT(2, 5, 6)
    ATTNBENCH_TILE_DOT(2, 5, 7)
    ATTNBENCH_TILE_DOT(3, 4, 6)
    ATTNBENCH_TILE_DOT(3, 4, 7)
    ATTNBENCH_TILE_DOT(3, 5, 6)
    ATTNBENCH_TILE_DOT(3, 5, 7)
#undef ATTNBENCH_TILE_DOT
  }
};

}  // namespace attnbench::simd
