// flash_cpu's kernels (the forward's query blocks, the backward's key blocks and the decode path's
// pieces) on the avx2 SIMD path (harness/simd/avx2.h). Compile options: -mavx2 -mfma -mf16c.
#include "harness/simd/avx2.h"
#include "variants/cpu/flash_cpu/backward_key_block.h"
#include "variants/cpu/flash_cpu/decode_piece.h"
#include "variants/cpu/flash_cpu/forward_query_block.h"
#include "variants/cpu/flash_cpu/kernels.h"

namespace attnbench::flash_cpu {

Kernels avx2_kernels() {
  return {&attend_query_block<simd::Avx2, NoBf16Dot>, &backward_key_block<simd::Avx2>,
          &attend_decode_piece<simd::Avx2>, &merge_decode_states<simd::Avx2>};
}

}  // namespace attnbench::flash_cpu
