#include "harness/measure/tensor_packing.h"

#include <cstring>

#include "harness/core/element_types.h"
#include "harness/core/tensor.h"

namespace attnbench {

HostBuffer pack_tensor(const std::vector<float>& bhsd_values, DType dtype, Layout layout,
                       int64_t batch, int64_t heads, int64_t seq, int64_t dim) {
  HostBuffer stored(static_cast<std::size_t>(batch * heads * seq * dim) *
                    static_cast<std::size_t>(element_bytes(dtype)));
  const TensorView view = make_view("tensor", stored.data(), dtype, layout, batch, heads, seq, dim);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t row = 0; row < seq; ++row) {
        const float* source =
            &bhsd_values[static_cast<std::size_t>(((b * heads + h) * seq + row) * dim)];
        narrow_from_fp32(
            dtype, source,
            static_cast<std::byte*>(view.data) + view.offset(b, h, row) * element_bytes(dtype),
            dim);
      }
  return stored;
}

void unpack_tensor(const void* stored, DType dtype, Layout layout, int64_t batch, int64_t heads,
                   int64_t seq, int64_t dim, std::vector<float>& bhsd_values) {
  bhsd_values.resize(static_cast<std::size_t>(batch * heads * seq * dim));
  const TensorView view = make_view("tensor", stored, dtype, layout, batch, heads, seq, dim);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t row = 0; row < seq; ++row) {
        const auto* source = static_cast<const std::byte*>(view.data) +
                             view.offset(b, h, row) * element_bytes(dtype);
        widen_to_fp32(dtype, source,
                      &bhsd_values[static_cast<std::size_t>(((b * heads + h) * seq + row) * dim)],
                      dim);
      }
}

HostBuffer pack_codes(const std::vector<uint8_t>& bhsd_codes, Layout layout, int64_t batch,
                      int64_t heads, int64_t seq, int64_t dim) {
  HostBuffer stored(bhsd_codes.size());
  TensorView view = make_view("codes", stored.data(), DType::fp32, layout, batch, heads, seq, dim);
  view.kv_codes = true;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t row = 0; row < seq; ++row)
        std::memcpy(view.row<uint8_t>(b, h, row),
                    &bhsd_codes[static_cast<std::size_t>(((b * heads + h) * seq + row) * dim)],
                    static_cast<std::size_t>(dim));
  return stored;
}

PackedInputs pack_inputs(const HostTensors& in) {
  const Shape& s = in.shape;
  if (is_quantized(s.kv_dtype)) {
    return {pack_tensor(in.q, s.dtype, s.layout, s.batch, s.heads, s.seq_q, s.d_k),
            pack_codes(in.quantized.k_codes, s.layout, s.kv_stored_batch(), s.kv_heads,
                       s.kv_stored_rows(), s.d_k),
            pack_codes(in.quantized.v_codes, s.layout, s.kv_stored_batch(), s.kv_heads,
                       s.kv_stored_rows(), s.d_v)};
  }
  return {pack_tensor(in.q, s.dtype, s.layout, s.batch, s.heads, s.seq_q, s.d_k),
          pack_tensor(in.k, s.dtype, s.layout, s.kv_stored_batch(), s.kv_heads, s.kv_stored_rows(),
                      s.d_k),
          pack_tensor(in.v, s.dtype, s.layout, s.kv_stored_batch(), s.kv_heads, s.kv_stored_rows(),
                      s.d_v)};
}

}  // namespace attnbench
