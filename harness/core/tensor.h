// Views of the attention tensors: a base pointer, the element type and the strides of the batch,
// head and row dimensions (the d dimension is contiguous). One view type serves every layout, so
// bhsd and bshd are the same memory read with different strides, never a copy.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "harness/core/dtype.h"
#include "harness/core/shape.h"

namespace attnbench {

// A typed access a tensor cannot serve: an element type of another size than the stored dtype's
// (head<float>() on bf16 would walk twice the bytes), or a (batch, head, row) outside the tensor.
// The message is one line naming the tensor, its dtype and what was asked; the harness adds the
// variant's name and fails the case.
class TensorAccessError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The element type row<T> is asked for, as errors name it.
template <class T>
const char* element_type_name() {
  using Element = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<Element, float>) return "float";
  if constexpr (std::is_same_v<Element, uint16_t>) return "uint16_t";
  if constexpr (std::is_same_v<Element, uint8_t>) return "uint8_t";
  if constexpr (std::is_same_v<Element, int8_t>) return "int8_t";
  return "another type";
}

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::fp32;
  int64_t batch_stride = 0;  // elements between batches
  int64_t head_stride = 0;   // elements between heads
  int64_t row_stride = 0;    // elements between rows (sequence positions)
  // The extents every access is checked against, and the name errors give ("q", "k", "v", "o").
  int64_t batch = 0, heads = 0, seq = 0, dim = 0;
  const char* name = "tensor";
  // K or V of a quantized cache (kv_quant.h): one-byte int8 or fp8 codes, read as int8_t or
  // uint8_t, in the case's layout; `dtype` is then the case's, which the codes stand in for.
  bool kv_codes = false;

  // The bytes of one stored element.
  int64_t stored_bytes() const { return kv_codes ? 1 : element_bytes(dtype); }

  int64_t offset(int64_t batch_index, int64_t head, int64_t row) const {
    return batch_index * batch_stride + head * head_stride + row * row_stride;
  }
  // The address of row `row` of (batch, head), untyped (for code that switches on dtype). Always
  // inlined, as row() below is, for the same reason.
  __attribute__((always_inline)) void* address(int64_t batch_index, int64_t head,
                                               int64_t row) const {
    check_position(batch_index, head, row);
    return static_cast<char*>(data) + offset(batch_index, head, row) * stored_bytes();
  }
  // Row `row` of (batch, head), typed: T is float for fp32 and uint16_t for bf16 and fp16 (any
  // type of the stored element's size). One compare and branch each, so a loop may take a row
  // at a time. Always inlined, with its check: a kernel path's object must not emit a copy that
  // the rest of the program could end up calling (tests/build_checks/isa_symbols.sh).
  template <class T>
  __attribute__((always_inline)) T* row(int64_t batch_index, int64_t head, int64_t row) const {
    if (__builtin_expect(static_cast<int64_t>(sizeof(T)) != stored_bytes(), 0))
      throw_wrong_element_type(element_type_name<T>(), static_cast<int64_t>(sizeof(T)));
    check_position(batch_index, head, row);
    return static_cast<T*>(data) + offset(batch_index, head, row);
  }

 private:
  __attribute__((always_inline)) void check_position(int64_t batch_index, int64_t head,
                                                     int64_t row) const {
    // Unsigned compares take a negative index as a huge one: one branch per index.
    if (__builtin_expect(static_cast<uint64_t>(batch_index) >= static_cast<uint64_t>(batch) ||
                             static_cast<uint64_t>(head) >= static_cast<uint64_t>(heads) ||
                             static_cast<uint64_t>(row) >= static_cast<uint64_t>(seq),
                         0))
      throw_out_of_range(batch_index, head, row);
  }
  [[noreturn]] void throw_wrong_element_type(const char* requested, int64_t requested_bytes) const;
  [[noreturn]] void throw_out_of_range(int64_t batch_index, int64_t head, int64_t row) const;
};

// The view of a [batch, heads, seq, dim] tensor stored in `layout`, called `name` in errors.
inline TensorView make_view(const char* name, const void* data, DType dtype, Layout layout,
                            int64_t batch, int64_t heads, int64_t seq, int64_t dim) {
  TensorView view;
  view.data = const_cast<void*>(data);
  view.dtype = dtype;
  view.batch = batch;
  view.heads = heads;
  view.seq = seq;
  view.dim = dim;
  view.name = name;
  view.batch_stride = heads * seq * dim;
  if (layout == Layout::bhsd) {
    view.head_stride = seq * dim;
    view.row_stride = dim;
  } else {
    view.head_stride = dim;
    view.row_stride = heads * dim;
  }
  return view;
}

// The four views of one problem's Q, K, V and O at the given base pointers.
struct AttentionViews {
  TensorView q, k, v, o;
};

// K and V of a paged shape are its page pools: [pool pages, kv_heads, page size, d] (variant.h's
// KvPageTable says how a key is found in them); of a quantized one (Shape::kv_dtype), one-byte
// codes.
inline AttentionViews make_views(const Shape& s, const void* q, const void* k, const void* v,
                                 void* o) {
  AttentionViews views{make_view("q", q, s.dtype, s.layout, s.batch, s.heads, s.seq_q, s.d_k),
                       make_view("k", k, s.dtype, s.layout, s.kv_stored_batch(), s.kv_heads,
                                 s.kv_stored_rows(), s.d_k),
                       make_view("v", v, s.dtype, s.layout, s.kv_stored_batch(), s.kv_heads,
                                 s.kv_stored_rows(), s.d_v),
                       make_view("o", o, s.dtype, s.layout, s.batch, s.heads, s.seq_q, s.d_v)};
  views.k.kv_codes = views.v.kv_codes = is_quantized(s.kv_dtype);
  return views;
}

// One (batch, query head) slice: the query head's Q and O rows, the K and V of the key/value head
// it reads (GQA), and the distance between consecutive rows of each (d in bhsd, heads * d in
// bshd). T is the element type as stored: float, or uint16_t for bf16 and fp16.
template <class T>
struct HeadView {
  const T* q;
  const T* k;
  const T* v;
  T* o;
  int64_t q_row_stride, k_row_stride, v_row_stride, o_row_stride;
  float* weights;  // [seq_q, seq_kv], row-major; null unless weights are asked for
};

template <class T>
HeadView<T> head_view(const Shape& s, const AttentionViews& views, float* weights, int64_t batch,
                      int64_t head) {
  const int64_t kv_head = head / s.group_size();
  return {views.q.row<const T>(batch, head, 0),
          views.k.row<const T>(batch, kv_head, 0),
          views.v.row<const T>(batch, kv_head, 0),
          views.o.row<T>(batch, head, 0),
          views.q.row_stride,
          views.k.row_stride,
          views.v.row_stride,
          views.o.row_stride,
          weights ? weights + (batch * s.heads + head) * s.seq_q * s.seq_kv : nullptr};
}

}  // namespace attnbench
