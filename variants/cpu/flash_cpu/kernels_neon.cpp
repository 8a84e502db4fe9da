// flash_cpu's kernels (the forward's query blocks, the backward's key blocks and the decode path's
// pieces) on the neon SIMD path (harness/simd/neon.h). Compile options: none (NEON is part of
// AArch64).
#include "harness/simd/neon.h"
#include "variants/cpu/flash_cpu/backward_key_block.h"
#include "variants/cpu/flash_cpu/decode_piece.h"
#include "variants/cpu/flash_cpu/forward_query_block.h"
#include "variants/cpu/flash_cpu/kernels.h"

namespace attnbench::flash_cpu {

Kernels neon_kernels() {
  return {&attend_query_block<simd::Neon, NoBf16Dot>, &backward_key_block<simd::Neon>,
          &attend_decode_piece<simd::Neon>, &merge_decode_states<simd::Neon>};
}

}  // namespace attnbench::flash_cpu
