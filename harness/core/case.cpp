#include "harness/core/case.h"

#include <fmt/format.h>

namespace attnbench {

std::string case_id(const std::string& variant, const Shape& s) {
  // The mask slot reads "full" or "causal" as it did before masks were an axis, so the ids of
  // existing results still match; the other masks and the modifiers are appended.
  std::string id =
      fmt::format("{}|b{}|h{}|kv{}|q{}|k{}|dk{}|dv{}|{}|{}|{}", variant, s.batch, s.heads,
                  s.kv_heads, s.seq_q, s.seq_kv, s.d_k, s.d_v, s.causal ? "causal" : "full",
                  to_string(s.dtype), to_string(s.layout));
  if (s.mask.kind != MaskKind::none && s.mask.kind != MaskKind::causal)
    id += "|" + to_string(s.mask);
  if (s.alibi) id += "|alibi";
  if (s.softcap > 0) id += fmt::format("|softcap:{}", s.softcap);
  // Serving cases only: the ids of every case without them stay as they were.
  if (!s.kv_lens.empty()) id += "|kv_lens:" + kv_lens_text(s.kv_lens);
  if (s.kv_cache.is_paged()) id += "|" + to_string(s.kv_cache);
  if (is_quantized(s.kv_dtype)) id += fmt::format("|kv_dtype:{}", to_string(s.kv_dtype));
  // Appended only past the forward, so every forward case keeps the id it had before the axis.
  if (s.pass != Pass::fwd) id += fmt::format("|{}", to_string(s.pass));
  return id;
}

}  // namespace attnbench
