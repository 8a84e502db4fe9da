// One problem's inputs on the host, as the oracle reads them.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/core/shape.h"

namespace attnbench {

// A quantized cache's inputs (Shape::kv_dtype, kv_quant.h), beside K and V, which then hold the
// dequantized values code * scale in fp32 (what the oracle reads): the codes, in the order of K
// and V, and the scales (kv_scale_count(shape) each, in variant.h's KvScales order) are what an
// executor loads; k_exact and v_exact keep the values before quantizing, for kv_quant_error
// (oracle.h). All empty for an unquantized cache.
struct QuantizedKv {
  std::vector<uint8_t> k_codes, v_codes;
  std::vector<float> k_scales, v_scales;
  std::vector<float> k_exact, v_exact;
};

// Q, K and V as fp32 numbers in bhsd order, whatever shape.dtype and shape.layout say: the values
// are already rounded to shape.dtype, so they are exactly the values a variant receives, and an
// executor stores them in the dtype and layout when it loads them.
//
// A paged shape (Shape::kv_cache paged) keeps K and V as its page pools, [pool pages, kv_heads,
// page size, d], and `block_table` [batch, pages_per_sequence] names the pool page of each run of
// page-size keys of each sequence (-1 past a sequence's last page), as variant.h's KvPageTable
// reads it. Contiguous shapes leave the table empty. In a ragged batch the keys past a
// sequence's own length (the padding of a contiguous cache, the tail of its last page) are 0.
struct HostTensors {
  Shape shape;
  std::vector<float> q, k, v;
  std::vector<int32_t> block_table;
  // dO, the shape of O, for a shape whose pass needs the backward (empty otherwise): rounded to
  // shape.dtype like the inputs.
  std::vector<float> dout;
  QuantizedKv quantized;
};

}  // namespace attnbench
