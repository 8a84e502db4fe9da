// The row-wise steps of flash_cpu's backward around its key-block kernels (backward_key_block.h),
// plain C++ compiled with the variant: D = rowsum(dO o O) for every query row before them, and
// after them dQ = the sum of the threads' dQ copies (backward_blocks.h says why there are copies).
// Both are O(rows * d) against the kernels' O(rows * keys * d): not worth a SIMD path.
#pragma once

#include <cstdint>

#include "harness/core/element_types.h"
#include "harness/variant/variant.h"

namespace attnbench::flash_cpu {

// delta[row] = sum_c dO[row][c] O[row][c], in fp32, for query rows numbered
// (batch * heads + head) * seq_q + i, from first_row to end_row.
inline void output_gradient_dots(const BackwardProblem& p, int64_t first_row, int64_t end_row,
                                 float* delta) {
  const Shape& s = p.shape;
  for (int64_t row = first_row; row < end_row; ++row) {
    const int64_t head_index = row / s.seq_q;
    const int64_t b = head_index / s.heads, h = head_index % s.heads, i = row % s.seq_q;
    const void* o = p.tensors.o.address(b, h, i);
    const void* dout = p.dout.address(b, h, i);
    float dot = 0.0f;
    for (int64_t c = 0; c < s.d_v; ++c)
      dot += load_as_fp32(s.dtype, o, c) * load_as_fp32(p.dout.dtype, dout, c);
    delta[row] = dot;
  }
}

// dQ's rows first_row .. end_row (numbered as above) = the sum of `copies` dQ copies, each
// copy_floats apart, with rows dk_stride apart.
inline void sum_query_gradients(const BackwardProblem& p, const float* copies, int copies_count,
                                int64_t copy_floats, int64_t dk_stride, int64_t first_row,
                                int64_t end_row) {
  const Shape& s = p.shape;
  for (int64_t row = first_row; row < end_row; ++row) {
    const int64_t head_index = row / s.seq_q;
    float* dq = p.dq.row<float>(head_index / s.heads, head_index % s.heads, row % s.seq_q);
    const float* first = copies + row * dk_stride;
    for (int64_t c = 0; c < s.d_k; ++c) dq[c] = first[c];
    for (int t = 1; t < copies_count; ++t) {
      const float* copy = first + t * copy_floats;
      for (int64_t c = 0; c < s.d_k; ++c) dq[c] += copy[c];
    }
  }
}

}  // namespace attnbench::flash_cpu
