// flash_cpu's kernels on the avx512 SIMD path (harness/simd/avx512.h). Compile options: -mavx512f
// -mavx2 -mfma -mf16c.
#include "harness/simd/avx512.h"
#include "variants/cpu/flash_cpu/kernels.h"
#include "variants/cpu/flash_cpu/key_block.h"
#include "variants/cpu/flash_cpu/query_block.h"

namespace attnbench::flash_cpu {

Kernels avx512_kernels() {
  return {&attend_query_block<simd::Avx512, NoBf16Dot>, &backward_key_block<simd::Avx512>};
}

}  // namespace attnbench::flash_cpu
