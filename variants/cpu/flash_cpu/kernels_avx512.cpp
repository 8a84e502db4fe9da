// flash_cpu's kernels (the forward's query blocks, the backward's key blocks and the decode path's
// pieces) on the avx512 SIMD path (harness/simd/avx512.h). Compile options: -mavx512f -mavx2 -mfma
// -mf16c.
#include "harness/simd/avx512.h"
#include "variants/cpu/flash_cpu/backward_key_block.h"
#include "variants/cpu/flash_cpu/decode_piece.h"
#include "variants/cpu/flash_cpu/forward_query_block.h"
#include "variants/cpu/flash_cpu/kernels.h"

namespace attnbench::flash_cpu {

Kernels avx512_kernels() {
  return {&attend_query_block<simd::Avx512, NoBf16Dot>, &backward_key_block<simd::Avx512>,
          &attend_decode_piece<simd::Avx512>, &merge_decode_states<simd::Avx512>};
}

}  // namespace attnbench::flash_cpu
