// flash_cpu's kernels (the forward's query blocks and the decode path's pieces) on the avx2 SIMD
// path (harness/simd/avx2.h). Compile options: -mavx2 -mfma -mf16c.
#include "harness/simd/avx2.h"
#include "variants/cpu/flash_cpu/decode_piece.h"
#include "variants/cpu/flash_cpu/query_block.h"

namespace attnbench::flash_cpu {

BlockFunction avx2_query_block_kernel() { return &attend_query_block<simd::Avx2, NoBf16Dot>; }

DecodeKernels avx2_decode_kernels() {
  return {&attend_decode_piece<simd::Avx2>, &merge_decode_states<simd::Avx2>};
}

}  // namespace attnbench::flash_cpu
