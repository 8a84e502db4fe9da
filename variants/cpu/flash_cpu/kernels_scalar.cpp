// flash_cpu's kernels on the scalar SIMD path (harness/simd/scalar.h). Compile options: none (and
// no auto-vectorisation: see CMakeLists.txt).
#include "harness/simd/scalar.h"
#include "variants/cpu/flash_cpu/query_block.h"

namespace attnbench::flash_cpu {

BlockFunction scalar_query_block_kernel() { return &attend_query_block<simd::Scalar, NoBf16Dot>; }

}  // namespace attnbench::flash_cpu
