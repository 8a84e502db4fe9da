// Moves tensors between the oracle's form (fp32 values in bhsd order, host_tensors.h) and the
// form a variant reads (the case's dtype and layout), on the host. Executors pack the inputs when
// they load them and unpack O when they fetch it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "harness/core/host_buffer.h"
#include "harness/core/host_tensors.h"
#include "harness/core/shape.h"

namespace attnbench {

// The [batch, heads, seq, dim] tensor `bhsd_values` stored in `dtype` and `layout`: raw bytes,
// element_bytes(dtype) each, on a line-aligned buffer (host_buffer.h). Values are rounded to
// nearest even when dtype is narrower.
HostBuffer pack_tensor(const std::vector<float>& bhsd_values, DType dtype, Layout layout,
                       int64_t batch, int64_t heads, int64_t seq, int64_t dim);

// The inverse: a stored tensor read back as fp32 values in bhsd order.
void unpack_tensor(const void* stored, DType dtype, Layout layout, int64_t batch, int64_t heads,
                   int64_t seq, int64_t dim, std::vector<float>& bhsd_values);

// A quantized cache's one-byte codes (host_tensors.h), in bhsd order, stored in `layout`.
HostBuffer pack_codes(const std::vector<uint8_t>& bhsd_codes, Layout layout, int64_t batch,
                      int64_t heads, int64_t seq, int64_t dim);

// Q, K and V of `inputs` packed for inputs.shape; K and V as codes when the cache is quantized.
struct PackedInputs {
  HostBuffer q, k, v;
};
PackedInputs pack_inputs(const HostTensors& inputs);

}  // namespace attnbench
