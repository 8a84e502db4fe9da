#include "harness/measure/kv_quantizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "harness/core/kv_quant.h"

namespace attnbench {

namespace {

// Calls visit(offset) for the offset (in values) of every row sequence `batch`, KV head
// `kv_head` holds in K or V of `dim` values: its own keys (keys_of), contiguous or through its
// pages. Only those: a ragged sequence's padding and a last page's tail are never read, and
// whatever they hold (attend takes any file) must not move the sequence's scale.
template <class Visit>
void for_each_sequence_row(const HostTensors& t, int64_t batch, int64_t kv_head, int64_t dim,
                           Visit visit) {
  const Shape& s = t.shape;
  const int64_t keys = s.keys_of(batch);
  if (!s.kv_cache.is_paged()) {
    for (int64_t row = 0; row < keys; ++row)
      visit(((batch * s.kv_heads + kv_head) * s.seq_kv + row) * dim);
    return;
  }
  const int64_t page_size = s.kv_cache.page_size;
  for (int64_t p = 0; p < s.pages_per_sequence() && p * page_size < keys; ++p) {
    const int32_t page =
        t.block_table[static_cast<std::size_t>(batch * s.pages_per_sequence() + p)];
    if (page < 0) continue;
    for (int64_t row = 0; row < std::min(page_size, keys - p * page_size); ++row)
      visit(((page * s.kv_heads + kv_head) * page_size + row) * dim);
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
  // A scale over an infinity or a NaN turns its whole row or sequence into NaN: refused by name
  // (attend's fp16 rounding can make an infinity of a finite fp32 value).
  for (const auto& [name, values] : {std::pair{"K", &t.k}, std::pair{"V", &t.v}}) {
    const auto bad =
        std::find_if(values->begin(), values->end(), [](float x) { return !std::isfinite(x); });
    if (bad != values->end()) {
      throw std::invalid_argument(fmt::format(
          "{} element {} is {} in the case's dtype: a {} KV cache takes finite values only", name,
          bad - values->begin(), *bad, to_string(s.kv_dtype)));
    }
  }
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
