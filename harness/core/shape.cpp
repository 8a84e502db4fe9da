#include "harness/core/shape.h"

#include <fmt/format.h>

#include <algorithm>

namespace attnbench {

std::string validate(const Shape& s) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"batch", s.batch}, {"heads", s.heads},   {"kv_heads", s.kv_heads},
      {"seq_q", s.seq_q}, {"seq_kv", s.seq_kv}, {"d_k", s.d_k},
      {"d_v", s.d_v}};
  for (const auto& [name, value] : sizes) {
    if (value <= 0) return fmt::format("{} must be positive, got {}", name, value);
  }
  if (s.heads % s.kv_heads != 0) {
    return fmt::format("heads ({}) must be a multiple of kv_heads ({})", s.heads, s.kv_heads);
  }
  // With the mask aligned to the end, rows before seq_q - seq_kv would see no key at all:
  // their softmax is undefined, so we refuse the shape instead of inventing an output.
  if (s.causal && s.seq_q > s.seq_kv) {
    return fmt::format("causal attention needs seq_q <= seq_kv (got seq_q {} > seq_kv {})", s.seq_q,
                       s.seq_kv);
  }
  // Element counts (scores and every tensor) must fit comfortably in int64 byte offsets; the
  // products are taken in double so that an absurd shape cannot overflow before it is refused.
  const auto product = [](double a, double b, double c, double d) { return a * b * c * d; };
  const double batch = static_cast<double>(s.batch);
  const double largest = std::max({product(batch, s.heads, s.seq_q, s.seq_kv),
                                   product(batch, s.heads, s.seq_q, std::max(s.d_k, s.d_v)),
                                   product(batch, s.kv_heads, s.seq_kv, std::max(s.d_k, s.d_v))});
  if (largest > 1e15) return fmt::format("shape too large: {:.3g} elements in one tensor", largest);
  return {};
}

std::string describe(const Shape& s) {
  std::string text = fmt::format("b{} h{}/{} q{} kv{} dk{} dv{}{}", s.batch, s.heads, s.kv_heads,
                                 s.seq_q, s.seq_kv, s.d_k, s.d_v, s.causal ? " causal" : "");
  if (s.dtype != DType::fp32) text += fmt::format(" {}", to_string(s.dtype));
  if (s.layout != Layout::bhsd) text += fmt::format(" {}", to_string(s.layout));
  return text;
}

}  // namespace attnbench
