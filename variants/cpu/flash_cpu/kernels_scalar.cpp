// flash_cpu's kernels on the scalar SIMD path (harness/simd/scalar.h). Compile options: none (and
// no auto-vectorisation: see CMakeLists.txt).
#include "harness/simd/scalar.h"
#include "variants/cpu/flash_cpu/kernels.h"
#include "variants/cpu/flash_cpu/key_block.h"
#include "variants/cpu/flash_cpu/query_block.h"

namespace attnbench::flash_cpu {

Kernels scalar_kernels() {
  return {&attend_query_block<simd::Scalar, NoBf16Dot>, &backward_key_block<simd::Scalar>};
}

}  // namespace attnbench::flash_cpu
