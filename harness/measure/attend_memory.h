// The host memory `attnbench attend` allocates for one problem, counted once its inputs are read
// and before any of the rest is, so a problem that cannot fit is refused with its sizes instead
// of failing part way through.
#pragma once

#include <cstddef>

#include "harness/core/shape.h"
#include "harness/variant/variant.h"

namespace attnbench {

// `elements` float32 values in bytes; in double, as the counts below may be products no check
// has bounded.
double fp32_bytes(double elements);

// The attention weights, [batch, heads, seq_q, seq_kv] float32 values.
double fp32_weights_bytes(const Shape& s);

// Refuses (std::runtime_error, one line naming the variant, the problem and the sizes) a problem
// whose memory does not fit in what is available now: the variant's workspace (on the host, for
// a CPU variant), the inputs' fp32 copy and their copy at the dtype, the output (at the dtype
// and as float32), and the weights when asked for (the executor's and the copy written out).
// With the backward: dO (read, and at the dtype) and dQ, dK, dV (the executor's and the copies
// written out), all counted as fp32 at most. `reserved`: the address space the variant's library
// maps for itself (Variant::reserved_address_space), checked against an address-space limit.
void require_attend_memory(const Shape& s, const VariantInfo& variant, std::size_t workspace,
                           bool with_weights, std::size_t reserved = 0);

}  // namespace attnbench
