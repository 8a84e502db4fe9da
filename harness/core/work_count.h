// How much work one forward pass is: the FLOPs of its two matrix products over the unmasked
// query-key pairs, and the fewest bytes it must move.
#pragma once

#include <string>

#include "harness/core/shape.h"

namespace attnbench {

struct WorkCount {
  // Query-key pairs that contribute: all seq_q * seq_kv, or only the unmasked ones when causal.
  double pairs = 0;
  // 2 * batch * heads * pairs * (d_k + d_v): the two matrix products.
  double flops = 0;
  // Q, K, V read once, O written once (and the weights, when returned), in bytes, at the size
  // of the case's dtype.
  double min_bytes = 0;
  // How the FLOPs were counted, stored in every record so runs are never compared across
  // conventions by mistake.
  std::string flop_convention;
};

WorkCount count_work(const Shape& shape, bool with_weights = false);

}  // namespace attnbench
