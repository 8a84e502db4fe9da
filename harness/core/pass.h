// Which pass of training a case times: the forward, the backward (dQ, dK, dV from dO), or both.
// A backward case runs the variant's own forward first, untimed, so the backward gets the O and
// whatever the forward keeps for it (the weights P, or the per-row log-sum-exp).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace attnbench {

enum class Pass { fwd, bwd, fwd_bwd };

const char* to_string(Pass pass);
std::optional<Pass> parse_pass(const std::string& name);
const std::vector<Pass>& all_passes();

// True for bwd and fwd_bwd: the passes that need the variant's backward.
inline bool needs_backward(Pass pass) { return pass != Pass::fwd; }

}  // namespace attnbench
