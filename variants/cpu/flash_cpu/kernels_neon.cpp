// flash_cpu's kernels on the neon SIMD path (harness/simd/neon.h). Compile options: none (NEON is
// part of AArch64).
#include "harness/simd/neon.h"
#include "variants/cpu/flash_cpu/kernels.h"
#include "variants/cpu/flash_cpu/key_block.h"
#include "variants/cpu/flash_cpu/query_block.h"

namespace attnbench::flash_cpu {

Kernels neon_kernels() {
  return {&attend_query_block<simd::Neon, NoBf16Dot>, &backward_key_block<simd::Neon>};
}

}  // namespace attnbench::flash_cpu
