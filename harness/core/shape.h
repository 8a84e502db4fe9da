// The problem shape every variant, the oracle and the sweep agree on.
#pragma once

#include <cstdint>
#include <string>

#include "harness/core/dtype.h"

namespace attnbench {

// The tensors, in the element type `dtype` and the layout `layout` (bhsd shown; bshd swaps the
// heads and seq dimensions, see tensor.h):
//   Q [batch, heads,    seq_q,  d_k]    K [batch, kv_heads, seq_kv, d_k]
//   V [batch, kv_heads, seq_kv, d_v]    O [batch, heads,    seq_q,  d_v]
//   weights (optional, always fp32 bhsd) [batch, heads, seq_q, seq_kv]
// Query head h reads key/value head h / (heads / kv_heads) (GQA; MQA when kv_heads = 1).
struct Shape {
  int64_t batch = 1;
  int64_t heads = 1;
  int64_t kv_heads = 1;
  int64_t seq_q = 1;
  int64_t seq_kv = 1;
  int64_t d_k = 1;
  int64_t d_v = 1;
  bool causal = false;
  DType dtype = DType::fp32;
  Layout layout = Layout::bhsd;

  int64_t group_size() const { return heads / kv_heads; }
  int64_t q_elements() const { return batch * heads * seq_q * d_k; }
  int64_t k_elements() const { return batch * kv_heads * seq_kv * d_k; }
  int64_t v_elements() const { return batch * kv_heads * seq_kv * d_v; }
  int64_t o_elements() const { return batch * heads * seq_q * d_v; }
  int64_t weight_elements() const { return batch * heads * seq_q * seq_kv; }

  // The causal mask is aligned to the end (as in PyTorch and FlashAttention): query row i
  // sees keys 0 .. i + (seq_kv - seq_q). Returns how many keys row i sees.
  int64_t visible_keys(int64_t row) const {
    if (!causal) return seq_kv;
    return row + (seq_kv - seq_q) + 1;
  }
};

// Empty when the shape is valid; otherwise a one-line reason naming the problem.
std::string validate(const Shape& shape);

// "b1 h8/8 q128 kv128 dk64 dv64 causal bf16 bshd" (fp32 and bhsd, the defaults, are not
// written) — used in test names, logs, records and case ids.
std::string describe(const Shape& shape);

}  // namespace attnbench
