// Lays K and V out as a paged KV cache (kv_cache.h): the pages of every sequence go into one pool
// in a seeded, shuffled order, and the block table says where each went. The sweep's inputs and
// `attend --kv-cache paged:P` both go through it. It costs one copy of K and V and a shuffle of
// the pages.
#pragma once

#include <cstdint>

#include "harness/core/host_tensors.h"

namespace attnbench {

// `inputs` holds contiguous K and V (fp32, bhsd, [batch, kv_heads, seq_kv, d]) of a shape whose
// kv_cache is paged: on return they are the page pools and inputs.block_table is set
// (host_tensors.h). The keys past a sequence's own length are left out; the tail of its last page
// is 0. The same seed places the pages the same way.
void lay_out_paged(HostTensors& inputs, uint64_t seed);

// The inverse, for a producer outside C++ that has no block table (the PyTorch peer, through
// `attnbench prepare`): a paged shape's pools in `inputs` read through its table back into
// contiguous K and V, [batch, kv_heads, seq_kv, d], 0 past each sequence's own keys; the table is
// cleared. Nothing changes for a contiguous shape.
void gather_paged(HostTensors& inputs);

// Zeroes the keys (and values) past each sequence's own length in contiguous K and V, so that
// a variant which reads them instead of stopping at kv_lens gets wrong scores, not the ones
// the padding happened to hold.
void clear_ragged_padding(HostTensors& inputs);

}  // namespace attnbench
