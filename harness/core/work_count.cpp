#include "harness/core/work_count.h"

#include <fmt/format.h>

namespace attnbench {

namespace {

// The unmasked pairs of one (sequence, head) of `s` (a shape with no kv_lens, its seq_kv that
// sequence's cache length), and how they were counted.
double pairs_of(const Shape& s, std::string& convention) {
  const double q = static_cast<double>(s.seq_q);
  const double kv = static_cast<double>(s.seq_kv);
  switch (s.mask.kind) {
    case MaskKind::none: convention = "full"; return q * kv;
    case MaskKind::causal:
      // Row i sees i + (seq_kv - seq_q) + 1 keys: an arithmetic series over the rows.
      convention = "causal: unmasked pairs only";
      return q * (kv - q + 1) + q * (q - 1) / 2;
    case MaskKind::window:
    case MaskKind::prefix:
    case MaskKind::documents:
      // A sum over the rows' key ranges: O(seq_q), exact, and the same geometry kernels use.
      convention = to_string(s.mask) + ": unmasked pairs only";
      return static_cast<double>(s.mask_geometry().visible_pairs());
  }
  return q * kv;
}

}  // namespace

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
  // A ragged batch's pairs are its sequences' mean, so flops = 2 B H pairs (d_k + d_v) holds.
  // One copy without the lengths, not one per sequence: a copy per sequence made planning a batch
  // of 130,000 lengths quadratic (seconds a case).
  double pairs_sum = 0, keys_sum = 0;
  Shape one_sequence = s;
  one_sequence.kv_lens.clear();
  for (int64_t b = 0; b < (s.kv_lens.empty() ? 1 : s.batch); ++b) {
    one_sequence.seq_kv = s.keys_of(b);
    pairs_sum += pairs_of(one_sequence, work.flop_convention);
    keys_sum += static_cast<double>(one_sequence.seq_kv);
  }
  const double sequences = s.kv_lens.empty() ? 1.0 : static_cast<double>(s.batch);
  work.pairs = pairs_sum / sequences;
  const double heads = static_cast<double>(s.batch * s.heads);
  const double flops_per_pair =
      pass_flop_factor(s.pass) * 2.0 * heads * static_cast<double>(s.d_k + s.d_v);
  if (s.pass != Pass::fwd)
    work.flop_convention +=
        fmt::format("; {}: {}x forward", to_string(s.pass), pass_flop_factor(s.pass));
  work.flops = flops_per_pair * work.pairs;
  work.dense_flops = flops_per_pair * q * kv;
  work.density = work.pairs / (q * kv);
  // Q, K, V and O move at the dtype's size; the weights are always fp32. K and V count each
  // sequence's own keys once per key/value head (not a contiguous ragged cache's padding, nor a
  // last page's unused tail), and a paged cache adds its block table.
  const double kv_rows = keys_sum * (s.kv_lens.empty() ? static_cast<double>(s.batch) : 1.0) *
                         static_cast<double>(s.kv_heads);
  const double kv_elements = kv_rows * static_cast<double>(s.d_k + s.d_v);
  const double tensor_elements = static_cast<double>(s.q_elements() + s.o_elements()) + kv_elements;
  const double block_table_bytes =
      static_cast<double>(s.batch * s.pages_per_sequence()) * sizeof(int32_t);
  // A quantized cache (kv_quant.h) moves its K and V as 1-byte codes, plus the fp32 scales of K
  // and V: one per row read (int8), or one per (sequence, KV head) (fp8_e4m3).
  double kv_bytes = kv_elements * static_cast<double>(element_bytes(s.dtype));
  switch (s.kv_dtype) {
    case KvDType::case_dtype: break;
    case KvDType::int8: kv_bytes = kv_elements + 2.0 * kv_rows * kv_scale_bytes; break;
    case KvDType::fp8_e4m3:
      kv_bytes = kv_elements + 2.0 * static_cast<double>(s.batch * s.kv_heads) * kv_scale_bytes;
      break;
  }
  const double forward_bytes =
      static_cast<double>(s.q_elements() + s.o_elements()) *
          static_cast<double>(element_bytes(s.dtype)) +
      kv_bytes + block_table_bytes +
      (with_weights ? static_cast<double>(s.weight_elements()) * sizeof(float) : 0.0);
  // The backward reads Q, K, V, O and dO in the dtype and writes dQ, dK, dV in fp32.
  const double backward_bytes = (tensor_elements + static_cast<double>(s.o_elements())) *
                                    static_cast<double>(element_bytes(s.dtype)) +
                                (static_cast<double>(s.q_elements()) + kv_elements) * sizeof(float);
  switch (s.pass) {
    case Pass::fwd: work.min_bytes = forward_bytes; break;
    case Pass::bwd: work.min_bytes = backward_bytes; break;
    case Pass::fwd_bwd: work.min_bytes = forward_bytes + backward_bytes; break;
  }
  return work;
}

}  // namespace attnbench
