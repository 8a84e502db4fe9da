#include "harness/core/shape.h"

#include <fmt/format.h>

#include <optional>

#include "harness/core/checked_math.h"

namespace attnbench {

namespace {
constexpr int64_t max_tensor_elements = 1000000000000000;  // 1e15
}  // namespace

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
  // Element counts must fit comfortably in int64 byte offsets, for every tensor (checked: a
  // wrapped product would pass any bound).
  const std::pair<const char*, std::optional<int64_t>> tensors[] = {
      {"Q", checked_product({s.batch, s.heads, s.seq_q, s.d_k})},
      {"K", checked_product({s.batch, s.kv_heads, s.seq_kv, s.d_k})},
      {"V", checked_product({s.batch, s.kv_heads, s.seq_kv, s.d_v})},
      {"O", checked_product({s.batch, s.heads, s.seq_q, s.d_v})},
      {"score", checked_product({s.batch, s.heads, s.seq_q, s.seq_kv})}};
  for (const auto& [name, elements] : tensors) {
    if (!elements || *elements > max_tensor_elements) {
      return fmt::format("shape too large: {} elements in {}",
                         elements ? fmt::format("{:.3g}", static_cast<double>(*elements))
                                  : std::string("more than 9.2e18"),
                         name);
    }
  }
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
