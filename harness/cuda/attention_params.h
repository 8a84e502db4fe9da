// The one parameter block of the CUDA kernels (fused, flash_tc, chunked_cuda and cublas'
// softmax), as flash-attention's Flash_fwd_params: the base pointer and the batch, head and row
// strides of Q, K, V and O in elements, built on the host from the Problem's views (tensor.h), so
// bhsd and bshd are the same kernel with different strides and never a copy; the shape as ints;
// the scale in log2 units; the mask and the score modifiers. Passed by value, it lives in the
// kernel's constant bank: a field costs a register only while a kernel holds it.
//
// Kernels index with int64 bases (batch * batch_stride + head * head_stride) and 32-bit row
// strides: a row stride is at most heads * d (bshd), and 64-bit arithmetic per row costs
// registers the tile loops need. make_attention_params checks that every int fits.
#pragma once

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "harness/core/tensor.h"
#include "harness/cuda/launch_math.h"
#include "harness/cuda/mask_math.h"
#include "harness/variant/variant.h"

namespace attnbench {

// Fields in the order the kernels read them together: the pointers, the 64-bit strides, then the
// 32-bit row strides side by side (flash_tc's register budget was tuned on this layout).
struct AttentionParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  int64_t q_batch_stride, q_head_stride, k_batch_stride, k_head_stride;
  int64_t v_batch_stride, v_head_stride, o_batch_stride, o_head_stride;
  int q_row_stride, k_row_stride, v_row_stride, o_row_stride;
  int seq_q, seq_kv, d_k, d_v;
  int group;  // heads / kv_heads: query head h reads kv head h / group
  mask_math::DeviceMask mask;
  mask_math::ScoreModifiers modifiers;  // read only by the kernels' kModifiers instantiations
  float scale_log2;                     // scale * log2(e): scores in log2 units, ready for exp2
  int batch, heads, kv_heads;
  // Each tensor's rows all start on a 16-byte boundary and are whole 16-byte chunks, so 16-byte
  // copies need no tail and no misaligned access.
  bool q_aligned_rows, k_aligned_rows, v_aligned_rows, o_aligned_rows;
};

namespace attention_params_detail {

inline int to_int(int64_t value, const char* what) {
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
    throw std::runtime_error(std::string("CUDA kernels: ") + what + " " + std::to_string(value) +
                             " does not fit in a 32-bit int");
  }
  return static_cast<int>(value);
}

inline bool aligned_rows(const TensorView& view, int64_t row_elements) {
  const int64_t bytes = element_bytes(view.dtype);
  return reinterpret_cast<std::uintptr_t>(view.data) % 16 == 0 &&
         view.batch_stride * bytes % 16 == 0 && view.head_stride * bytes % 16 == 0 &&
         view.row_stride * bytes % 16 == 0 && row_elements * bytes % 16 == 0;
}

}  // namespace attention_params_detail

// The parameters of `problem`'s launch; `document_starts` is the device array of the documents
// mask (upload_document_starts), null for the other masks.
inline AttentionParams make_attention_params(const Problem& problem, const int* document_starts) {
  using attention_params_detail::aligned_rows;
  using attention_params_detail::to_int;
  const Shape& s = problem.shape;
  const AttentionViews& t = problem.tensors;
  AttentionParams p;
  p.q = t.q.data;
  p.k = t.k.data;
  p.v = t.v.data;
  p.o = t.o.data;
  p.q_batch_stride = t.q.batch_stride;
  p.q_head_stride = t.q.head_stride;
  p.k_batch_stride = t.k.batch_stride;
  p.k_head_stride = t.k.head_stride;
  p.v_batch_stride = t.v.batch_stride;
  p.v_head_stride = t.v.head_stride;
  p.o_batch_stride = t.o.batch_stride;
  p.o_head_stride = t.o.head_stride;
  p.q_row_stride = to_int(t.q.row_stride, "the Q row stride");
  p.k_row_stride = to_int(t.k.row_stride, "the K row stride");
  p.v_row_stride = to_int(t.v.row_stride, "the V row stride");
  p.o_row_stride = to_int(t.o.row_stride, "the O row stride");
  p.seq_q = to_int(s.seq_q, "seq_q");
  p.seq_kv = to_int(s.seq_kv, "seq_kv");
  p.d_k = to_int(s.d_k, "d_k");
  p.d_v = to_int(s.d_v, "d_v");
  p.group = to_int(s.group_size(), "the GQA group");
  p.mask = mask_math::make_device_mask(s, document_starts);
  p.modifiers = mask_math::make_modifiers(s);
  p.scale_log2 = problem.scale * launch::kLog2e;
  p.batch = to_int(s.batch, "batch");
  p.heads = to_int(s.heads, "heads");
  p.kv_heads = to_int(s.kv_heads, "kv_heads");
  p.q_aligned_rows = aligned_rows(t.q, s.d_k);
  p.k_aligned_rows = aligned_rows(t.k, s.d_k);
  p.v_aligned_rows = aligned_rows(t.v, s.d_v);
  p.o_aligned_rows = aligned_rows(t.o, s.d_v);
  return p;
}

}  // namespace attnbench
