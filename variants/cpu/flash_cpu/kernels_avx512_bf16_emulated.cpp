// flash_cpu's kernels on the avx512_bf16 path (kernels_avx512_bf16.cpp's: the forward's query
// blocks with bf16 products as vdpbf16ps, the backward's key blocks, the decode path's pieces)
// with every AVX-512 instruction emulated lane by lane (harness/simd/avx512_emulation.h), so that
// tests hold the AVX-512 code against the float64 oracle on any x86-64 host with AVX2 (Zen 3
// included; the avx512 path's code is the same templates without the bf16 products). For tests
// (ATTNBENCH_FLASH_CPU_ISA=avx512_bf16_emulated), not for timing. Compile options: AVX2's, with
// AVX-512 switched off whatever the build's -march (CMakeLists.txt), so nothing here may fault on
// a CPU with AVX2 alone.
// clang-format off
#include "harness/simd/avx512_emulation.h"  // first: the headers below find its names
// clang-format on
#include "variants/cpu/flash_cpu/backward_key_block.h"
#include "variants/cpu/flash_cpu/bf16_dot.h"
#include "variants/cpu/flash_cpu/decode_piece.h"
#include "variants/cpu/flash_cpu/forward_query_block.h"
#include "variants/cpu/flash_cpu/kernels.h"

namespace attnbench::flash_cpu {

// The (emulated) AVX-512 operations under a name of this object's own (see bf16_dot.h).
struct EmulatedAvx512WithBf16 : simd::Avx512 {};
using EmulatedBf16Dot = Bf16DotOn<EmulatedAvx512WithBf16>;

Kernels avx512_bf16_emulated_kernels() {
  return {&attend_query_block<EmulatedAvx512WithBf16, EmulatedBf16Dot>,
          &backward_key_block<EmulatedAvx512WithBf16, EmulatedBf16Dot>,
          &attend_decode_piece<EmulatedAvx512WithBf16, EmulatedBf16Dot>,
          &merge_decode_states<EmulatedAvx512WithBf16>};
}

}  // namespace attnbench::flash_cpu
