// Which of flash_cpu's SIMD paths runs: chosen from the CPU's features, which are passed in so a
// test can ask what a CPU with fewer would get, and never a path the CPU lacks.
#pragma once

#include <functional>
#include <string>
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

// ATTNBENCH_FLASH_CPU_ISA=avx512_bf16_emulated (isa.h): the avx512_bf16 path on emulated AVX-512.
inline constexpr const char* kEmulatedVectorsName = kAvx512Bf16EmulatedName;

// Which paths run a case: `isa` every case the tiles do not take (its code on emulated AVX-512
// where `emulated_vectors`), `tiles` the others.
struct PathChoice {
  Isa isa = Isa::scalar;
  TileBackend tiles = TileBackend::none;
  bool emulated_vectors = false;
};

// As choose_isa, and the tiles: AMX wherever the CPU has it (amx_bf16 in `features`, which
// includes the OS's permission), or as `requested` says: "amx_bf16" (refused by name where AMX is
// absent), or kEmulatedTilesName. `isa` is then the path choose_isa picks without a request.
// kEmulatedVectorsName (refused where AVX2 is absent): avx512_bf16 on emulated AVX-512, no tiles.
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
// the path chosen without a request; for kEmulatedVectorsName avx512_bf16, whose kernels are then
// the emulated ones: take a path's kernels from vector_kernels(choose_paths(...)), never from
// kernels_of(choose_isa(...)).
Isa choose_isa(std::string_view requested, const CpuFeatures& features,
               const std::function<bool()>& bf16_dot_is_faster);

// choose_isa for this CPU and the environment's ATTNBENCH_FLASH_CPU_ISA; the throughput probe
// runs once per process, the first time a case could use it.
Isa choose_isa_for_this_cpu();

// The kernels of `isa` (one of isas_built()): its forward, backward and decode entry points.
Kernels kernels_of(Isa isa);

// The vector kernels `paths` chose (kernels_of its isa, or the emulated avx512_bf16 kernels), and
// the name a record's code path gives them.
Kernels vector_kernels(const PathChoice& paths);
std::string vector_path_name(const PathChoice& paths);

}  // namespace attnbench::flash_cpu
