#include "harness/core/work_count.h"

namespace attnbench {

WorkCount count_work(const Shape& s, bool with_weights) {
  WorkCount work;
  const double q = static_cast<double>(s.seq_q);
  const double kv = static_cast<double>(s.seq_kv);
  if (s.causal) {
    // Row i sees i + (seq_kv - seq_q) + 1 keys: an arithmetic series over the rows.
    const double first_row = kv - q + 1;
    work.pairs = q * first_row + q * (q - 1) / 2;
    work.flop_convention = "causal: unmasked pairs only";
  } else {
    work.pairs = q * kv;
    work.flop_convention = "full";
  }
  const double heads = static_cast<double>(s.batch * s.heads);
  work.flops = 2.0 * heads * work.pairs * static_cast<double>(s.d_k + s.d_v);
  // Q, K, V and O move at the dtype's size; the weights are always fp32.
  const double tensor_elements =
      static_cast<double>(s.q_elements() + s.k_elements() + s.v_elements() + s.o_elements());
  work.min_bytes = tensor_elements * static_cast<double>(element_bytes(s.dtype)) +
                   (with_weights ? static_cast<double>(s.weight_elements()) * sizeof(float) : 0.0);
  return work;
}

}  // namespace attnbench
