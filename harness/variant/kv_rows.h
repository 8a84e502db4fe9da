// Where one key's K or V row lives, contiguous or paged: the one lookup a variant reading a paged
// cache (and the oracle) makes per key, a load of the block table and a multiply for a paged one.
#pragma once

#include <cstdint>

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
