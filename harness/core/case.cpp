#include "harness/core/case.h"

#include <fmt/format.h>

namespace attnbench {

std::string case_id(const std::string& variant, const Shape& s) {
  return fmt::format("{}|b{}|h{}|kv{}|q{}|k{}|dk{}|dv{}|{}|{}|{}", variant, s.batch, s.heads,
                     s.kv_heads, s.seq_q, s.seq_kv, s.d_k, s.d_v, s.causal ? "causal" : "full",
                     to_string(s.dtype), to_string(s.layout));
}

}  // namespace attnbench
