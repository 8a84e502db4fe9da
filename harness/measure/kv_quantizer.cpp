#include "harness/measure/kv_quantizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "harness/core/kv_quant.h"

namespace attnbench {

namespace {

// Calls visit(offset) for the offset (in values) of every stored row of sequence `batch`, KV
// head `kv_head` in K or V of `dim` values: its seq_kv rows when contiguous (a ragged sequence's
// zero padding included), the rows of each of its pages when paged (a last page's zero tail
// included). Zero rows cannot move a largest magnitude, so a scale over them is the sequence's.
template <class Visit>
void for_each_sequence_row(const HostTensors& t, int64_t batch, int64_t kv_head, int64_t dim,
                           Visit visit) {
  const Shape& s = t.shape;
  if (!s.kv_cache.is_paged()) {
    for (int64_t row = 0; row < s.seq_kv; ++row)
      visit(((batch * s.kv_heads + kv_head) * s.seq_kv + row) * dim);
    return;
  }
  for (int64_t p = 0; p < s.pages_per_sequence(); ++p) {
    const int32_t page =
        t.block_table[static_cast<std::size_t>(batch * s.pages_per_sequence() + p)];
    if (page < 0) continue;
    for (int64_t row = 0; row < s.kv_cache.page_size; ++row)
      visit(((page * s.kv_heads + kv_head) * s.kv_cache.page_size + row) * dim);
  }
}

// One of K or V to fp8_e4m3 with one scale per (sequence, KV head): scale = max |x| / 448 over the
// sequence's keys, so its largest value maps to the largest finite code.
void quantize_fp8_e4m3(const HostTensors& t, std::vector<float>& values, int64_t dim,
                       std::vector<uint8_t>& codes, std::vector<float>& scales) {
  const Shape& s = t.shape;
  codes.assign(values.size(), 0);
  scales.assign(static_cast<std::size_t>(s.batch * s.kv_heads), 0.0f);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.kv_heads; ++h) {
      float largest = 0.0f;
      for_each_sequence_row(t, b, h, dim, [&](int64_t at) {
        for (int64_t c = 0; c < dim; ++c)
          largest = std::max(largest, std::fabs(values[static_cast<std::size_t>(at + c)]));
      });
      const float scale = largest / fp8_e4m3_max;
      scales[static_cast<std::size_t>(b * s.kv_heads + h)] = scale;
      for_each_sequence_row(t, b, h, dim, [&](int64_t at) {
        for (int64_t c = 0; c < dim; ++c) {
          const auto i = static_cast<std::size_t>(at + c);
          codes[i] = scale > 0 ? fp8_e4m3_code(values[i] / scale) : 0;
          values[i] = fp8_e4m3_value(codes[i]) * scale;
        }
      });
    }
}

}  // namespace

void quantize_rows_int8(std::vector<float>& values, int64_t rows, int64_t dim,
                        std::vector<uint8_t>& codes, std::vector<float>& scales) {
  codes.assign(values.size(), 0);
  scales.assign(static_cast<std::size_t>(rows), 0.0f);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    float* row = &values[static_cast<std::size_t>(r * dim)];
    float largest = 0.0f;
    for (int64_t c = 0; c < dim; ++c) largest = std::max(largest, std::fabs(row[c]));
    const float scale = largest / int8_code_max;
    scales[static_cast<std::size_t>(r)] = scale;
    for (int64_t c = 0; c < dim; ++c) {
      const int8_t code = int8_code(row[c], scale);
      std::memcpy(&codes[static_cast<std::size_t>(r * dim + c)], &code, 1);
      row[c] = static_cast<float>(code) * scale;
    }
  }
}

void quantize_kv_cache(HostTensors& t) {
  const Shape& s = t.shape;
  if (!is_quantized(s.kv_dtype)) return;
  t.quantized.k_exact = t.k;
  t.quantized.v_exact = t.v;
  const int64_t rows = s.kv_stored_batch() * s.kv_heads * s.kv_stored_rows();
  if (s.kv_dtype == KvDType::int8) {
    quantize_rows_int8(t.k, rows, s.d_k, t.quantized.k_codes, t.quantized.k_scales);
    quantize_rows_int8(t.v, rows, s.d_v, t.quantized.v_codes, t.quantized.v_scales);
  } else {
    quantize_fp8_e4m3(t, t.k, s.d_k, t.quantized.k_codes, t.quantized.k_scales);
    quantize_fp8_e4m3(t, t.v, s.d_v, t.quantized.v_codes, t.quantized.v_scales);
  }
}

}  // namespace attnbench
