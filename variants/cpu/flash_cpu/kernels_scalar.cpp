// flash_cpu's kernels (the forward's query blocks, the backward's key blocks and the decode path's
// pieces) on the scalar SIMD path (harness/simd/scalar.h). Compile options: none (and no
// auto-vectorisation: see CMakeLists.txt).
#include "harness/simd/scalar.h"
#include "variants/cpu/flash_cpu/backward_key_block.h"
#include "variants/cpu/flash_cpu/decode_piece.h"
#include "variants/cpu/flash_cpu/forward_query_block.h"
#include "variants/cpu/flash_cpu/kernels.h"

namespace attnbench::flash_cpu {

Kernels scalar_kernels() {
  return {&attend_query_block<simd::Scalar, NoBf16Dot>, &backward_key_block<simd::Scalar>,
          &attend_decode_piece<simd::Scalar>, &merge_decode_states<simd::Scalar>};
}

}  // namespace attnbench::flash_cpu
