#include "harness/variant/variant.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <stdexcept>

namespace attnbench {

bool takes_mask(const Capabilities& caps, MaskKind kind) {
  if (kind == MaskKind::none) return true;
  if (kind == MaskKind::causal && caps.causal) return true;
  return std::find(caps.masks.begin(), caps.masks.end(), kind) != caps.masks.end();
}

std::string unsupported_reason(const VariantInfo& info, const Shape& shape, bool want_weights) {
  const Capabilities& caps = info.capabilities;
  const auto takes = [](const auto& list, auto value) {
    return std::find(list.begin(), list.end(), value) != list.end();
  };
  if (!takes(caps.dtypes, shape.dtype))
    return fmt::format("{} does not take {} tensors", info.name, to_string(shape.dtype));
  if (!takes(caps.layouts, shape.layout))
    return fmt::format("{} does not take the {} layout", info.name, to_string(shape.layout));
  if (!takes_mask(caps, shape.mask.kind)) {
    return shape.mask.kind == MaskKind::causal
               ? fmt::format("{} does not support a causal mask", info.name)
               : fmt::format("{} does not support the {} mask", info.name,
                             to_string(shape.mask.kind));
  }
  if (shape.alibi && !caps.alibi)
    return fmt::format("{} does not support the ALiBi bias", info.name);
  if (shape.softcap > 0 && !caps.softcap)
    return fmt::format("{} does not support soft-capping", info.name);
  if (needs_backward(shape.pass) && !caps.backward)
    return fmt::format("{} has no backward pass", info.name);
  if (needs_backward(shape.pass) && (!shape.kv_lens.empty() || shape.kv_cache.is_paged()))
    return "the backward pass takes neither ragged batches nor paged KV caches";
  if (needs_backward(shape.pass) && is_quantized(shape.kv_dtype))
    return "the backward pass takes no quantized KV cache (kv_dtype)";
  if (is_quantized(shape.kv_dtype) && !takes(caps.kv_dtypes, shape.kv_dtype))
    return fmt::format("{} does not read {} KV caches", info.name, to_string(shape.kv_dtype));
  if (!shape.kv_lens.empty() && !caps.ragged)
    return fmt::format("{} does not take ragged batches (kv_lens)", info.name);
  if (shape.kv_cache.is_paged() && !caps.paged_kv)
    return fmt::format("{} does not read paged KV caches", info.name);
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
  if (!caps.head_dims.empty() &&
      (!takes(caps.head_dims, shape.d_k) || !takes(caps.head_dims, shape.d_v))) {
    return fmt::format("{} takes d_k and d_v in {{{}}} only (got {} and {})", info.name,
                       fmt::join(caps.head_dims, ", "), shape.d_k, shape.d_v);
  }
  return {};
}

void Variant::run_backward(const BackwardProblem& problem) {
  (void)problem;
  throw std::runtime_error(fmt::format("variant {} has no backward pass", info().name));
}

void refuse_unsupported(const VariantInfo& info, const Shape& shape) {
  if (std::string reason = unsupported_reason(info, shape, false); !reason.empty()) {
    throw std::runtime_error(reason);
  }
}

}  // namespace attnbench
