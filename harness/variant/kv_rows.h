// Where one key's K or V row lives, contiguous or paged: the one lookup a variant reading a paged
// cache (and the oracle) makes per key, a load of the block table and a multiply for a paged one.
#pragma once

#include <cstdint>

#include "harness/core/kv_quant.h"
#include "harness/core/tensor.h"
#include "harness/variant/variant.h"

namespace attnbench {

// The row of key `key` of (sequence `batch`, key/value head `kv_head`) in `view` (a problem's K
// or V): row `key` of (batch, kv_head) when the table is unset (contiguous), else row
// key % page_size of the pool page the block table names (KvPageTable). Checked like
// TensorView::row, so a table entry of -1 or past the pool throws TensorAccessError.
template <class T>
T* kv_row(const TensorView& view, const KvPageTable& pages, int64_t batch, int64_t kv_head,
          int64_t key) {
  if (pages.block_table == nullptr) return view.row<T>(batch, kv_head, key);
  const int32_t page = pages.block_table[batch * pages.pages_per_sequence + key / pages.page_size];
  return view.row<T>(page, kv_head, key % pages.page_size);
}

// The scale of key `key` of (sequence `batch`, KV head `kv_head`) in `scales` (a problem's
// kv_scales.k or .v, variant.h's KvScales): per stored row for int8 (the row kv_row finds), per
// (sequence, KV head) for fp8_e4m3.
inline float kv_scale_at(const Shape& s, const KvPageTable& pages, const float* scales,
                         int64_t batch, int64_t kv_head, int64_t key) {
  if (s.kv_dtype == KvDType::fp8_e4m3) return scales[batch * s.kv_heads + kv_head];
  if (pages.block_table == nullptr) return scales[(batch * s.kv_heads + kv_head) * s.seq_kv + key];
  const int32_t page = pages.block_table[batch * pages.pages_per_sequence + key / pages.page_size];
  return scales[(page * s.kv_heads + kv_head) * pages.page_size + key % pages.page_size];
}

// One K or V row read as fp32 values, row[c], whatever the cache stores: the dtype's elements
// widened (E, element_types.h), or a quantized cache's codes times their scale (kv_quant.h).
// Rows::row(problem, view, scales, batch, kv_head, key) finds it through kv_row and kv_scale_at;
// scales is problem.kv_scales.k or .v (unused for the dtype).
template <class E>
struct DtypeKvRows {
  struct Row {
    const typename E::Storage* at;
    float operator[](int64_t c) const { return E::load(at[c]); }
  };
  static Row row(const Problem& p, const TensorView& view, const float*, int64_t batch,
                 int64_t kv_head, int64_t key) {
    return {kv_row<const typename E::Storage>(view, p.pages, batch, kv_head, key)};
  }
};
struct Int8KvRows {
  struct Row {
    const int8_t* at;
    float scale;
    float operator[](int64_t c) const { return static_cast<float>(at[c]) * scale; }
  };
  static Row row(const Problem& p, const TensorView& view, const float* scales, int64_t batch,
                 int64_t kv_head, int64_t key) {
    return {kv_row<const int8_t>(view, p.pages, batch, kv_head, key),
            kv_scale_at(p.shape, p.pages, scales, batch, kv_head, key)};
  }
};
struct Fp8E4m3KvRows {
  struct Row {
    const uint8_t* at;
    float scale;
    float operator[](int64_t c) const { return fp8_e4m3_value(at[c]) * scale; }
  };
  static Row row(const Problem& p, const TensorView& view, const float* scales, int64_t batch,
                 int64_t kv_head, int64_t key) {
    return {kv_row<const uint8_t>(view, p.pages, batch, kv_head, key),
            kv_scale_at(p.shape, p.pages, scales, batch, kv_head, key)};
  }
};

// Calls function(Rows{}) with the row reader of `kv_dtype`, E's for the case's dtype.
template <class E, class Function>
decltype(auto) with_kv_rows(KvDType kv_dtype, Function&& function) {
  switch (kv_dtype) {
    case KvDType::int8: return function(Int8KvRows{});
    case KvDType::fp8_e4m3: return function(Fp8E4m3KvRows{});
    case KvDType::case_dtype: break;
  }
  return function(DtypeKvRows<E>{});
}

// The table of a paged shape's host block table (host_tensors.h); unset for a contiguous one.
inline KvPageTable page_table_of(const Shape& shape, const int32_t* block_table) {
  if (!shape.kv_cache.is_paged()) return {};
  return {block_table, shape.pages_per_sequence(), shape.kv_cache.page_size};
}

// A head's Q and O rows and weights (head_view), for a variant that finds each K and V row with
// kv_row: the k and v of the result are null, since a paged cache has no one K tensor per head.
template <class T>
HeadView<T> head_rows(const Problem& p, int64_t batch, int64_t head) {
  const Shape& s = p.shape;
  return {p.tensors.q.row<const T>(batch, head, 0),
          nullptr,
          nullptr,
          p.tensors.o.row<T>(batch, head, 0),
          p.tensors.q.row_stride,
          p.tensors.k.row_stride,
          p.tensors.v.row_stride,
          p.tensors.o.row_stride,
          p.weights ? p.weights + (batch * s.heads + head) * s.seq_q * s.seq_kv : nullptr};
}

}  // namespace attnbench
