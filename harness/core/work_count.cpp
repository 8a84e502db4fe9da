#include "harness/core/work_count.h"

#include <fmt/format.h>

namespace attnbench {

double pass_flop_factor(Pass pass) {
  switch (pass) {
    case Pass::fwd: return 1.0;
    case Pass::bwd: return backward_flop_factor;
    case Pass::fwd_bwd: return 1.0 + backward_flop_factor;
  }
  return 1.0;
}

WorkCount count_work(const Shape& s, bool with_weights) {
  WorkCount work;
  const double q = static_cast<double>(s.seq_q);
  const double kv = static_cast<double>(s.seq_kv);
  switch (s.mask.kind) {
    case MaskKind::none:
      work.pairs = q * kv;
      work.flop_convention = "full";
      break;
    case MaskKind::causal:
      // Row i sees i + (seq_kv - seq_q) + 1 keys: an arithmetic series over the rows.
      work.pairs = q * (kv - q + 1) + q * (q - 1) / 2;
      work.flop_convention = "causal: unmasked pairs only";
      break;
    case MaskKind::window:
    case MaskKind::prefix:
    case MaskKind::documents:
      // A sum over the rows' key ranges: O(seq_q), exact, and the same geometry kernels use.
      work.pairs = static_cast<double>(s.mask_geometry().visible_pairs());
      work.flop_convention = to_string(s.mask) + ": unmasked pairs only";
      break;
  }
  const double heads = static_cast<double>(s.batch * s.heads);
  const double flops_per_pair =
      pass_flop_factor(s.pass) * 2.0 * heads * static_cast<double>(s.d_k + s.d_v);
  if (s.pass != Pass::fwd)
    work.flop_convention +=
        fmt::format("; {}: {}x forward", to_string(s.pass), pass_flop_factor(s.pass));
  work.flops = flops_per_pair * work.pairs;
  work.dense_flops = flops_per_pair * q * kv;
  work.density = work.pairs / (q * kv);
  // Q, K, V and O move at the dtype's size; the weights are always fp32.
  const double tensor_elements =
      static_cast<double>(s.q_elements() + s.k_elements() + s.v_elements() + s.o_elements());
  const double forward_bytes =
      tensor_elements * static_cast<double>(element_bytes(s.dtype)) +
      (with_weights ? static_cast<double>(s.weight_elements()) * sizeof(float) : 0.0);
  // The backward reads Q, K, V, O and dO in the dtype and writes dQ, dK, dV in fp32.
  const double backward_bytes =
      (tensor_elements + static_cast<double>(s.o_elements())) *
          static_cast<double>(element_bytes(s.dtype)) +
      static_cast<double>(s.q_elements() + s.k_elements() + s.v_elements()) * sizeof(float);
  switch (s.pass) {
    case Pass::fwd: work.min_bytes = forward_bytes; break;
    case Pass::bwd: work.min_bytes = backward_bytes; break;
    case Pass::fwd_bwd: work.min_bytes = forward_bytes + backward_bytes; break;
  }
  return work;
}

}  // namespace attnbench
