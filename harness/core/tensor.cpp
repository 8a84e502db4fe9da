#include "harness/core/tensor.h"

#include <fmt/format.h>

namespace attnbench {

void TensorView::throw_wrong_element_type(const char* requested, int64_t requested_bytes) const {
  if (kv_codes)
    throw TensorAccessError(fmt::format(
        "tensor {} holds the one-byte codes of a quantized cache but was read as {} ({}-byte "
        "elements): row<T> takes int8_t or uint8_t",
        name, requested, requested_bytes));
  throw TensorAccessError(
      fmt::format("tensor {} holds {} ({}-byte elements) but was read as {} ({}-byte elements): "
                  "head<T> and row<T> take "
                  "float for fp32 and uint16_t for bf16 and fp16",
                  name, to_string(dtype), element_bytes(dtype), requested, requested_bytes));
}

void TensorView::throw_out_of_range(int64_t batch_index, int64_t head, int64_t row) const {
  throw TensorAccessError(fmt::format(
      "tensor {} has no (batch {}, head {}, row {}): it is [batch {}, heads {}, seq {}, d {}]",
      name, batch_index, head, row, batch, heads, seq, dim));
}

}  // namespace attnbench
