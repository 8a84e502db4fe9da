// Throughput loops: independent chains of one instruction, for the CPU peak checks
// (harness/measure/cpu_peak.cpp) and for choosing between code paths (flash_cpu's bf16 products).
// Each runs `steps` steps of 12 chains and returns a value that keeps the work alive; only
// instructions the given CpuFeatures has are ever run.
#pragma once

#include <cstdint>

#include "harness/simd/cpu_features.h"

namespace attnbench {

// The widest FMA `features` has (AVX-512, AVX2 + FMA, NEON, else SSE2 / plain multiply-add);
// sets the FLOPs one step does.
double run_fma_loop(const CpuFeatures& features, int64_t steps, double& flops_per_step);

// vdpbf16ps on 512 bits; returns 0 without running anything when `features` lacks AVX512_BF16.
double run_bf16_dot_loop(const CpuFeatures& features, int64_t steps, double& flops_per_step);

// TDPBF16PS (AMX) into 4 independent accumulator tiles, operands already in tiles; returns 0
// without running anything (and reports no FLOPs) unless `features` has amx_tile and amx_bf16.
// In a translation unit of its own (amx_throughput_loop.cpp), the only one compiled for AMX.
double run_amx_bf16_loop(const CpuFeatures& features, int64_t steps, double& flops_per_step);

// Whether bf16 products run faster as vdpbf16ps than widened to fp32 on the FMA units. It
// depends on the core: AMD Zen 4 retires vdpbf16ps at twice the FMA's FLOP rate, the Intel Xeon
// hosts measured here at half of it. Measured on one thread the first time it is asked (a few
// ms, best of 7 interleaved trials of each, so a busy neighbour only lowers both); false without
// AVX512_BF16 or AVX-512 FMA.
bool bf16_dot_outpaces_fma(const CpuFeatures& features);

}  // namespace attnbench
