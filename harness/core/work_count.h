// How much work one pass is: the FLOPs of the forward's two matrix products over the unmasked
// query-key pairs (2.5 times that for the backward, 3.5 for both), and the fewest bytes it must
// move.
#pragma once

#include <string>

#include "harness/core/shape.h"

namespace attnbench {

struct WorkCount {
  // Query-key pairs that contribute: all seq_q * seq_kv, or only the unmasked ones under a mask.
  double pairs = 0;
  // 2 * batch * heads * pairs * (d_k + d_v): the two matrix products. The score modifiers
  // (ALiBi, soft-capping) add O(pairs) elementwise work and are not counted, like the softmax.
  double flops = 0;
  // The same over all seq_q * seq_kv pairs, as if no key were masked.
  double dense_flops = 0;
  // pairs / (seq_q * seq_kv): the fraction of the score matrix the mask leaves.
  double density = 1;
  // Q, K, V read once, O written once (and the weights, when returned), in bytes, at the size
  // of the case's dtype; K and V once per key/value head and sequence, a ragged sequence's own
  // keys only, plus a paged cache's block table (int32). Records carry it as bytes and
  // bytes_moved, and flops / min_bytes as arithmetic_intensity.
  double min_bytes = 0;
  // How the FLOPs were counted, stored in every record so runs are never compared across
  // conventions by mistake.
  std::string flop_convention;
};

// The backward's FLOPs as a multiple of the forward's, over the same unmasked pairs: five matrix
// products of the forward's size (dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q, and S = Q K^T
// again) against the forward's two, the convention FlashAttention's papers use. fwd_bwd is 3.5x.
inline constexpr double backward_flop_factor = 2.5;

// 1 for fwd, backward_flop_factor for bwd, 1 + backward_flop_factor for fwd_bwd.
double pass_flop_factor(Pass pass);

WorkCount count_work(const Shape& shape, bool with_weights = false);

}  // namespace attnbench
