// The SIMD code paths ("instruction sets") kernels are built for, which of them this binary
// holds, and which of those a CPU can run. Each path is one header beside this one (scalar.h,
// avx2.h, avx512.h, neon.h); avx512_bf16 is the AVX-512 path with the vdpbf16ps bf16 products;
// amx_bf16 is that path with the bf16 matrix products on AMX tiles (amx_tiles.h), for the cases
// its kernels take (the others run on the avx512 paths).
// The extensions a path needs are listed once, in `required_features`, and are the options
// CMakeLists.txt compiles that path's translation units with.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "harness/simd/cpu_features.h"

namespace attnbench {

enum class Isa { scalar, avx2, avx512, avx512_bf16, amx_bf16, neon };

const char* to_string(Isa isa);

// The value of ATTNBENCH_FLASH_CPU_ISA that runs the amx_bf16 path's code on emulated tiles
// (harness/simd/tile_emulation.h) and emulated AVX-512 (avx512_emulation.h): for tests on CPUs
// without AMX; it needs AVX2.
// Not a path of isas_built(): nothing chooses it unasked, and it is slow.
inline constexpr const char* kAmxEmulatedName = "amx_bf16_emulated";

// Likewise the avx512_bf16 path's code on emulated AVX-512, for tests on CPUs without AVX-512.
inline constexpr const char* kAvx512Bf16EmulatedName = "avx512_bf16_emulated";

// The paths compiled into this binary: scalar everywhere, plus avx2/avx512/avx512_bf16/amx_bf16 on
// x86-64 and neon on aarch64.
const std::vector<Isa>& isas_built();

// The CPU features `isa` needs.
CpuFeatures required_features(Isa isa);

// Whether `isa` is built into this binary and a CPU with `features` can run it.
bool isa_runs_on(Isa isa, const CpuFeatures& features);

// The widest built path a CPU with `features` runs, not counting avx512_bf16 (which pays off only
// where vdpbf16ps outpaces the FMA units: see throughput_loops.h) nor amx_bf16 (which only some
// cases take: flash_cpu's isa_choice.h).
Isa widest_isa(const CpuFeatures& features);

// `requested` (an ISA's name, as in ATTNBENCH_FLASH_CPU_ISA) resolved against `features`; throws
// std::invalid_argument naming the problem when it is no path's name, a path not built here, or
// one the CPU lacks.
Isa parse_isa(std::string_view requested, const CpuFeatures& features);

// The features of a CPU with `detected` seen as one that has only what path `path_name` needs
// (ATTNBENCH_CPU_FEATURES=avx2 on an AVX-512 host: the code paths and peak loops an AVX2-only
// machine runs). Throws std::invalid_argument, naming ATTNBENCH_CPU_FEATURES, as parse_isa does.
CpuFeatures limit_to_path(std::string_view path_name, const CpuFeatures& detected);

}  // namespace attnbench
