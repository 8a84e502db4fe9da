#include "harness/plan/config_keys.h"

namespace attnbench {

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = {
      {"", "name", "string", "no spaces, slashes or control characters; not . or ..", nullptr,
       "required", "the run's name: its results folder is named after it"},
      {"", "variants", "string or array of strings",
       "variant names (attnbench list), or the groups cpu, cuda, all", nullptr, "required",
       "the variants to run; a name given twice runs once"},
      {"axes", "batch", "integer axis", ">= 1", "[1]", nullptr, "batch size"},
      {"axes", "heads", "integer axis", ">= 1", "[1]", nullptr, "query heads"},
      {"axes", "kv_heads", "integer axis", ">= 1", nullptr, "heads",
       "key/value heads: fewer than heads is grouped-query attention (heads must be a multiple)"},
      {"axes", "seq_len", "integer axis", ">= 1", nullptr, "required, or seq_q and seq_kv",
       "sequence length: sets seq_q = seq_kv"},
      {"axes", "seq_q", "integer axis", ">= 1", nullptr, "seq_len",
       "query rows; with seq_kv, instead of seq_len"},
      {"axes", "seq_kv", "integer axis", ">= 1", nullptr, "seq_len",
       "key/value rows; with seq_q, instead of seq_len"},
      {"axes", "d_k", "integer axis", ">= 1", "[64]", nullptr, "head dimension of Q and K"},
      {"axes", "d_v", "integer axis", ">= 1", nullptr, "d_k", "head dimension of V and O"},
      {"axes", "mask", "string axis", "none, causal, window:L, prefix:P, documents:K", "[\"none\"]",
       nullptr, "the mask; documents:K draws the K documents' lengths from measure.seed"},
      {"axes", "causal", "boolean axis", "true, false", "[false]", nullptr,
       "the older spelling of mask: false is none, true is causal (not with mask)"},
      {"axes", "alibi", "boolean axis", "true, false", "[false]", nullptr,
       "add ALiBi's per-head linear bias to the scores"},
      {"axes", "softcap", "number axis", "0 (off) or a normal float32 value up to 1e38", "[0]",
       nullptr, "soft-cap the scores: s -> softcap * tanh(s / softcap)"},
      {"axes", "dtype", "string axis", "fp32, bf16, fp16", "[\"fp32\"]", nullptr,
       "element type of Q, K, V and O"},
      {"axes", "layout", "string axis", "bhsd, bshd", "[\"bhsd\"]", nullptr,
       "memory layout of Q, K, V and O"},
      {"axes", "kv_lens", "string axis",
       "comma-separated cache lengths, each 1 to 16777216 (e.g. \"1024,4096,65536,512\")", nullptr,
       "none",
       "a ragged batch: one cache length per sequence; sets batch = their count and seq_kv = the "
       "longest (not with seq_kv or tokens; batch only if it agrees)"},
      {"axes", "kv_cache", "string axis", "contiguous, paged:P (P >= 1 tokens per page)",
       "[\"contiguous\"]", nullptr,
       "how K and V are stored: contiguous tensors, or a pool of P-token pages placed in a seeded "
       "shuffled order with a block table per sequence"},
      {"axes", "kv_dtype", "string axis", "dtype, int8, fp8_e4m3", "[\"dtype\"]", nullptr,
       "element type K and V are stored in: the case's dtype, or a quantized cache of int8 codes "
       "(a fp32 scale per token and KV head) or fp8_e4m3 codes (a fp32 scale per sequence and KV "
       "head), quantized once from the drawn values; the oracle reads the dequantized values, and "
       "kv_quant_rel_l2_err records the cache's own error. Any seq_q (a prefill reads the same "
       "codes), contiguous or paged, forward only (a backward case is skipped); variants that read "
       "no such cache skip the case"},
      {"axes", "pass", "string axis", "fwd, bwd, fwd_bwd", "[\"fwd\"]", nullptr,
       "the pass timed: the forward, the backward alone (after an untimed forward), or both"},
      {"axes", "tokens", "integer axis", ">= 1", nullptr, "none",
       "sets batch = tokens / seq_q, in lockstep (not with batch)"},
      {"axes", "model_dim", "integer axis", ">= 1", nullptr, "none",
       "sets heads = model_dim / d_k, in lockstep (not with heads)"},
  };
  return keys;
}

std::vector<std::string> config_key_names(const std::string& section) {
  std::vector<std::string> names;
  for (const ConfigKey& key : config_keys())
    if (key.section == section) names.emplace_back(key.name);
  return names;
}

}  // namespace attnbench
