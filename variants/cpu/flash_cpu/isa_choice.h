// Which of flash_cpu's SIMD paths runs: chosen from the CPU's features, which are passed in so a
// test can ask what a CPU with fewer would get, and never a path the CPU lacks.
#pragma once

#include <functional>
#include <string_view>

#include "harness/simd/cpu_features.h"
#include "harness/simd/isa.h"
#include "variants/cpu/flash_cpu/blocks.h"
#include "variants/cpu/flash_cpu/decode_plan.h"
#include "variants/cpu/flash_cpu/kernels.h"

namespace attnbench::flash_cpu {

// `requested` (ATTNBENCH_FLASH_CPU_ISA) when not empty, checked against `features` (throws
// std::invalid_argument naming the problem); else the widest path `features` runs, and
// avx512_bf16 over avx512 only where `bf16_dot_is_faster()` says so (asked only then: it times
// both instructions).
Isa choose_isa(std::string_view requested, const CpuFeatures& features,
               const std::function<bool()>& bf16_dot_is_faster);

// choose_isa for this CPU and the environment's ATTNBENCH_FLASH_CPU_ISA; the throughput probe
// runs once per process, the first time a case could use it.
Isa choose_isa_for_this_cpu();

// The kernels of `isa` (one of isas_built()).
Kernels kernels_of(Isa isa);

// The decode kernels of `isa` (one of isas_built()).
DecodeKernels decode_kernels(Isa isa);

}  // namespace attnbench::flash_cpu
