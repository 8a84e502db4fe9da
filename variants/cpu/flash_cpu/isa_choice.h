// Which of flash_cpu's SIMD paths runs: chosen from the CPU's features, which are passed in so a
// test can ask what a CPU with fewer would get, and never a path the CPU lacks.
#pragma once

#include <functional>
#include <string_view>

#include "harness/simd/cpu_features.h"
#include "harness/simd/isa.h"
#include "variants/cpu/flash_cpu/kernels.h"
#include "variants/cpu/flash_cpu/tile_blocks.h"

namespace attnbench::flash_cpu {

// How the bf16 passes the tile path takes (takes_tiles in flash_cpu.cpp) run their products.
enum class TileBackend { none, hardware, emulated };

// ATTNBENCH_FLASH_CPU_ISA=amx_bf16_emulated (isa.h): the amx_bf16 path on emulated tiles.
inline constexpr const char* kEmulatedTilesName = kAmxEmulatedName;

// Which paths run a case: `isa` every case the tiles do not take, `tiles` the others.
struct PathChoice {
  Isa isa = Isa::scalar;
  TileBackend tiles = TileBackend::none;
};

// As choose_isa, and the tiles: AMX wherever the CPU has it (amx_bf16 in `features`, which
// includes the OS's permission), or as `requested` says: "amx_bf16" (refused by name where AMX is
// absent), or kEmulatedTilesName. `isa` is then the path choose_isa picks without a request.
PathChoice choose_paths(std::string_view requested, const CpuFeatures& features,
                        const std::function<bool()>& bf16_dot_is_faster);

// choose_paths for this CPU and the environment's ATTNBENCH_FLASH_CPU_ISA.
PathChoice choose_paths_for_this_cpu();

// The tile kernels of `tiles` (not none).
TileKernels tile_kernels(TileBackend tiles);

// `requested` (ATTNBENCH_FLASH_CPU_ISA) when not empty, checked against `features` (throws
// std::invalid_argument naming the problem); else the widest path `features` runs, and
// avx512_bf16 over avx512 only where `bf16_dot_is_faster()` says so (asked only then: it times
// both instructions). The vector path of choose_paths: for "amx_bf16" and kEmulatedTilesName,
// the path chosen without a request.
Isa choose_isa(std::string_view requested, const CpuFeatures& features,
               const std::function<bool()>& bf16_dot_is_faster);

// choose_isa for this CPU and the environment's ATTNBENCH_FLASH_CPU_ISA; the throughput probe
// runs once per process, the first time a case could use it.
Isa choose_isa_for_this_cpu();

// The kernels of `isa` (one of isas_built()): its forward, backward and decode entry points.
Kernels kernels_of(Isa isa);

}  // namespace attnbench::flash_cpu
