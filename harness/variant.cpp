#include "harness/variant.h"

#include <fmt/format.h>

namespace attnbench {

const char* to_string(Device device) { return device == Device::cpu ? "cpu" : "cuda"; }

const char* to_string(Precision precision) {
  switch (precision) {
    case Precision::fp32: return "fp32";
    case Precision::tf32: return "tf32";
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
  }
  return "unknown";
}

std::string unsupported_reason(const VariantInfo& info, const Shape& shape, bool want_weights) {
  const Capabilities& caps = info.capabilities;
  if (shape.causal && !caps.causal)
    return fmt::format("{} does not support a causal mask", info.name);
  if (shape.kv_heads != shape.heads && !caps.gqa) {
    return fmt::format("{} does not support kv_heads != heads (GQA)", info.name);
  }
  if (want_weights && !caps.returns_weights) {
    return fmt::format("{} does not return attention weights", info.name);
  }
  if (caps.max_d > 0 && (shape.d_k > caps.max_d || shape.d_v > caps.max_d)) {
    return fmt::format("{} supports d_k and d_v up to {} (got {} and {})", info.name, caps.max_d,
                       shape.d_k, shape.d_v);
  }
  return {};
}

}  // namespace attnbench
