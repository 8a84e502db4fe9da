// flash_cpu's kernels on the neon SIMD path (harness/simd/neon.h). Compile options: none (NEON is
// part of AArch64).
#include "harness/simd/neon.h"
#include "variants/cpu/flash_cpu/query_block.h"

namespace attnbench::flash_cpu {

BlockFunction neon_query_block_kernel() { return &attend_query_block<simd::Neon, NoBf16Dot>; }

}  // namespace attnbench::flash_cpu
