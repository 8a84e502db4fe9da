#include "harness/core/shape_fields.h"

namespace attnbench {

namespace {

using Json = nlohmann::ordered_json;

}  // namespace

const std::vector<ShapeField>& shape_fields() {
  static const std::vector<ShapeField> fields = {
      {"dtype", "string", "element type of Q, K, V and O: fp32, bf16 or fp16",
       [](const Shape& s) { return Json(to_string(s.dtype)); }},
      {"layout", "string", "memory layout of Q, K, V and O: bhsd or bshd",
       [](const Shape& s) { return Json(to_string(s.layout)); }},
      {"pass", "string", "the pass timed: fwd, bwd (the backward alone) or fwd_bwd (both)",
       [](const Shape& s) { return Json(to_string(s.pass)); }},
      {"batch", "integer", "batch size", [](const Shape& s) { return Json(s.batch); }},
      {"heads", "integer", "query heads", [](const Shape& s) { return Json(s.heads); }},
      {"kv_heads", "integer", "key/value heads (GQA when fewer than heads)",
       [](const Shape& s) { return Json(s.kv_heads); }},
      {"seq_q", "integer", "query positions", [](const Shape& s) { return Json(s.seq_q); }},
      {"seq_kv", "integer", "key/value positions", [](const Shape& s) { return Json(s.seq_kv); }},
      {"d_k", "integer", "query/key head dimension", [](const Shape& s) { return Json(s.d_k); }},
      {"d_v", "integer", "value head dimension", [](const Shape& s) { return Json(s.d_v); }},
      {"causal", "boolean", "causal mask aligned to the end (the mask is \"causal\")",
       [](const Shape& s) { return Json(s.causal); }},
      {"mask", "string", "none, causal, window:L, prefix:P or documents:K (aligned to the end)",
       [](const Shape& s) { return Json(to_string(s.mask)); }},
      {"doc_lens", "array|null", "the documents' lengths (documents mask only)",
       [](const Shape& s) {
         return s.mask.kind == MaskKind::documents ? Json(s.mask.doc_lens) : Json(nullptr);
       }},
      {"alibi", "boolean", "ALiBi bias -slope_h*|p(i)-j|, slope_h = 2^(-8(h+1)/heads)",
       [](const Shape& s) { return Json(s.alibi); }},
      {"softcap", "number", "scores soft-capped to c*tanh(s/c) at this c; 0 when off",
       [](const Shape& s) { return Json(s.softcap); }},
      {"kv_cache", "string", "how K and V are stored: contiguous, or paged:P (P-token pages)",
       [](const Shape& s) { return Json(to_string(s.kv_cache)); }},
      {"kv_lens", "array|null", "a ragged batch's cache length per sequence; null when not ragged",
       [](const Shape& s) { return s.kv_lens.empty() ? Json(nullptr) : Json(s.kv_lens); }},
      {"kv_dtype", "string",
       "element type K and V are stored in: the case's dtype, or int8 (a fp32 scale per token and "
       "KV head) or fp8_e4m3 (a fp32 scale per sequence and KV head) codes",
       [](const Shape& s) { return Json(kv_dtype_name(s)); }},
  };
  return fields;
}

}  // namespace attnbench
