#include "harness/plan/axes_table.h"

#include <fmt/format.h>

#include "harness/core/case.h"
#include "harness/core/named_values.h"

namespace attnbench {

namespace {

template <class T>
AxisValues as_values(const std::vector<T>& values) {
  AxisValues held;
  for (std::size_t i = 0; i < values.size(); ++i)
    held.emplace_back(std::in_place_type<T>, values[i]);
  return held;
}

// The readers of the kinds of axis, each through ConfigReader's checks.
AxisValues integer_values(const ConfigReader& reader, const toml::node& node,
                          const std::string& key) {
  return as_values(reader.axis(node, key));
}

AxisValues boolean_values(const ConfigReader& reader, const toml::node& node,
                          const std::string& key) {
  return as_values(reader.bool_axis(node, key));
}

AxisValues mask_values(const ConfigReader& reader, const toml::node& node, const std::string& key) {
  return as_values(reader.mask_axis(node, key));
}

// The causal boolean of configs written before the mask axis: false is none, true causal.
AxisValues causal_values(const ConfigReader& reader, const toml::node& node,
                         const std::string& key) {
  AxisValues masks;
  for (bool causal : reader.bool_axis(node, key))
    masks.emplace_back(causal ? MaskSpec::causal() : MaskSpec::none());
  return masks;
}

AxisValues softcap_values(const ConfigReader& reader, const toml::node& node,
                          const std::string& key) {
  return as_values(reader.softcap_axis(node, key));
}

AxisValues dtype_values(const ConfigReader& reader, const toml::node& node,
                        const std::string& key) {
  return as_values(reader.name_axis(node, key, parse_dtype, names_of(all_dtypes())));
}

AxisValues layout_values(const ConfigReader& reader, const toml::node& node,
                         const std::string& key) {
  return as_values(reader.name_axis(node, key, parse_layout, names_of(all_layouts())));
}

AxisValues pass_values(const ConfigReader& reader, const toml::node& node, const std::string& key) {
  return as_values(reader.name_axis(node, key, parse_pass, names_of(all_passes())));
}

AxisValues kv_dtype_values(const ConfigReader& reader, const toml::node& node,
                           const std::string& key) {
  return as_values(reader.name_axis(
      node, key, [](const std::string& text) { return parse_kv_dtype(text); },
      "dtype (the case's), int8 or fp8_e4m3"));
}

AxisValues kv_cache_values(const ConfigReader& reader, const toml::node& node,
                           const std::string& key) {
  return as_values(reader.spec_axis(
      node, key,
      [](const std::string& text, std::string* error) { return parse_kv_cache(text, error); },
      [](const KvCacheSpec& spec) { return to_string(spec); },
      "expected a string: contiguous or paged:P"));
}

AxisValues kv_lens_values(const ConfigReader& reader, const toml::node& node,
                          const std::string& key) {
  return as_values(reader.spec_axis(
      node, key,
      [](const std::string& text, std::string* error) { return parse_kv_lens(text, error); },
      [](const std::vector<int64_t>& lengths) { return kv_lens_text(lengths); },
      "expected a string of cache lengths, e.g. \"1024,4096,65536\""));
}

int64_t integer(const AxisValue& value) { return std::get<int64_t>(value); }

}  // namespace

const std::vector<AxisDefinition>& axis_definitions() {
  // The order is the sweep's: sequence length innermost but for kv_heads, the serving axes and
  // the passes, so each variant's cases grow in cost and the budget can predict a case from the
  // ones before it. An axis given in place of another (tokens for batch, model_dim for heads)
  // follows it: the one it replaces then holds its single default.
  static const std::vector<AxisDefinition> axes = {
      {{"axes", "batch", "integer axis", ">= 1", "[1]", nullptr, "batch size"},
       integer_values,
       [](AxisPoint& p, const AxisValue& v) { p.shape.batch = integer(v); }},
      {{"axes", "tokens", "integer axis", ">= 1", nullptr, "none",
        "sets batch = tokens / seq_q, in lockstep (not with batch)"},
       integer_values,
       [](AxisPoint& p, const AxisValue& v) { p.tokens = integer(v); }},
      {{"axes", "heads", "integer axis", ">= 1", "[1]", nullptr, "query heads"},
       integer_values,
       [](AxisPoint& p, const AxisValue& v) { p.shape.heads = integer(v); }},
      {{"axes", "model_dim", "integer axis", ">= 1", nullptr, "none",
        "sets heads = model_dim / d_k, in lockstep (not with heads)"},
       integer_values,
       [](AxisPoint& p, const AxisValue& v) { p.model_dim = integer(v); }},
      {{"axes", "d_k", "integer axis", ">= 1", "[64]", nullptr, "head dimension of Q and K"},
       integer_values,
       [](AxisPoint& p, const AxisValue& v) { p.shape.d_k = integer(v); }},
      {{"axes", "d_v", "integer axis", ">= 1", nullptr, "d_k", "head dimension of V and O"},
       integer_values,
       [](AxisPoint& p, const AxisValue& v) { p.d_v = integer(v); }},
      {{"axes", "dtype", "string axis", "fp32, bf16, fp16", "[\"fp32\"]", nullptr,
        "element type of Q, K, V and O"},
       dtype_values,
       [](AxisPoint& p, const AxisValue& v) { p.shape.dtype = std::get<DType>(v); }},
      {{"axes", "layout", "string axis", "bhsd, bshd", "[\"bhsd\"]", nullptr,
        "memory layout of Q, K, V and O"},
       layout_values,
       [](AxisPoint& p, const AxisValue& v) { p.shape.layout = std::get<Layout>(v); },
       nullptr,
       "--layout"},
      {{"axes", "mask", "string axis", "none, causal, window:L, prefix:P, documents:K",
        "[\"none\"]", nullptr,
        "the mask; documents:K draws the K documents' lengths from measure.seed"},
       mask_values,
       [](AxisPoint& p, const AxisValue& v) { p.mask = std::get<MaskSpec>(v); }},
      {{"axes", "causal", "boolean axis", "true, false", "[false]", nullptr,
        "the older spelling of mask: false is none, true is causal (not with mask)"},
       causal_values,
       nullptr,
       "mask"},
      {{"axes", "alibi", "boolean axis", "true, false", "[false]", nullptr,
        "add ALiBi's per-head linear bias to the scores"},
       boolean_values,
       [](AxisPoint& p, const AxisValue& v) { p.shape.alibi = std::get<bool>(v); },
       nullptr,
       "--alibi",
       "PyTorch's SDPA takes no ALiBi bias"},
      {{"axes", "softcap", "number axis", "0 (off) or a normal float32 value up to 1e38", "[0]",
        nullptr, "soft-cap the scores: s -> softcap * tanh(s / softcap)"},
       softcap_values,
       [](AxisPoint& p, const AxisValue& v) { p.shape.softcap = std::get<double>(v); },
       nullptr,
       "--softcap",
       "PyTorch's SDPA takes no soft-cap"},
      {{"axes", "seq_len", "integer axis", ">= 1", nullptr, "required, or seq_q and seq_kv",
        "sequence length: sets seq_q = seq_kv"},
       integer_values,
       [](AxisPoint& p, const AxisValue& v) {
         p.shape.seq_q = integer(v);
         p.shape.seq_kv = integer(v);
       }},
      {{"axes", "seq_q", "integer axis", ">= 1", nullptr, "seq_len",
        "query rows; with seq_kv, instead of seq_len"},
       integer_values,
       [](AxisPoint& p, const AxisValue& v) {
         p.shape.seq_q = integer(v);
         p.shape.seq_kv = 0;  // with kv_lens, seq_kv comes from each batch's lengths
       }},
      {{"axes", "seq_kv", "integer axis", ">= 1", nullptr, "seq_len",
        "key/value rows; with seq_q, instead of seq_len"},
       integer_values,
       [](AxisPoint& p, const AxisValue& v) { p.shape.seq_kv = integer(v); }},
      {{"axes", "kv_heads", "integer axis", ">= 1", nullptr, "heads",
        "key/value heads: fewer than heads is grouped-query attention (heads must be a "
        "multiple)"},
       integer_values,
       [](AxisPoint& p, const AxisValue& v) { p.kv_heads = integer(v); }},
      {{"axes", "kv_lens", "string axis",
        "comma-separated cache lengths, each 1 to 16777216 (e.g. \"1024,4096,65536,512\")", nullptr,
        "none",
        "a ragged batch: one cache length per sequence; sets batch = their count and seq_kv = "
        "the longest (not with seq_kv or tokens; batch only if it agrees)"},
       kv_lens_values,
       [](AxisPoint& p, const AxisValue& v) { p.kv_lengths = std::get<std::vector<int64_t>>(v); }},
      {{"axes", "kv_cache", "string axis", "contiguous, paged:P (P >= 1 tokens per page)",
        "[\"contiguous\"]", nullptr,
        "how K and V are stored: contiguous tensors, or a pool of P-token pages placed in a "
        "seeded shuffled order with a block table per sequence"},
       kv_cache_values,
       [](AxisPoint& p, const AxisValue& v) { p.shape.kv_cache = std::get<KvCacheSpec>(v); },
       nullptr,
       "--kv-cache"},
      {{"axes", "kv_dtype", "string axis", "dtype, int8, fp8_e4m3", "[\"dtype\"]", nullptr,
        "element type K and V are stored in: the case's dtype, or a quantized cache of int8 "
        "codes (a fp32 scale per token and KV head) or fp8_e4m3 codes (a fp32 scale per sequence "
        "and KV head), quantized once from the drawn values; the oracle reads the dequantized "
        "values, and kv_quant_rel_l2_err records the cache's own error. Any seq_q (a prefill "
        "reads the same codes), contiguous or paged, forward only (a backward case is skipped); "
        "variants that read no such cache skip the case"},
       kv_dtype_values,
       [](AxisPoint& p, const AxisValue& v) { p.shape.kv_dtype = std::get<KvDType>(v); },
       nullptr,
       "--kv-dtype",
       "PyTorch's SDPA reads no int8 or fp8 cache with scales (dequantizing first would time "
       "another computation)"},
      {{"axes", "pass", "string axis", "fwd, bwd, fwd_bwd", "[\"fwd\"]", nullptr,
        "the pass timed: the forward, the backward alone (after an untimed forward), or both"},
       pass_values,
       [](AxisPoint& p, const AxisValue& v) { p.shape.pass = std::get<Pass>(v); }},
  };
  return axes;
}

std::string stored_name(const AxisDefinition& axis) {
  return axis.stored_as != nullptr ? axis.stored_as : axis.key.name;
}

AxisValues default_values(const AxisDefinition& axis, const ConfigReader& reader) {
  if (axis.key.default_toml == nullptr) return {};
  const toml::table parsed = toml::parse(std::string("value = ") + axis.key.default_toml);
  return axis.read(reader, *parsed.get("value"), std::string("axes.") + axis.key.name);
}

std::string peer_skip_reason(const Shape& shape) {
  const ConfigReader reader("");
  for (const AxisDefinition& axis : axis_definitions()) {
    if (axis.peer_default_only == nullptr || axis.enter == nullptr) continue;
    const AxisValues defaults = default_values(axis, reader);
    if (defaults.size() != 1) continue;
    AxisPoint point;
    point.shape = shape;
    axis.enter(point, defaults.front());
    if (case_id("", point.shape) != case_id("", shape))
      return fmt::format("{}: {}", axis.key.name, axis.peer_default_only);
  }
  return {};
}

}  // namespace attnbench
