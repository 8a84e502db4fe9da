#include "harness/core/pass.h"

#include "harness/core/named_values.h"

namespace attnbench {

const char* to_string(Pass pass) {
  switch (pass) {
    case Pass::fwd: return "fwd";
    case Pass::bwd: return "bwd";
    case Pass::fwd_bwd: return "fwd_bwd";
  }
  return "fwd";
}

std::optional<Pass> parse_pass(const std::string& name) { return value_named(all_passes(), name); }

const std::vector<Pass>& all_passes() {
  static const std::vector<Pass> passes{Pass::fwd, Pass::bwd, Pass::fwd_bwd};
  return passes;
}

}  // namespace attnbench
