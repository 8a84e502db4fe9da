// The strided-batched GEMMs of cublas and cublas_tf32, as data: which matrices each product reads
// and writes, with cuBLAS's column-major arguments (op, m, n, k, leading dimensions, batch
// strides, beta). cublas.cu hands each GemmCall to cublasGemmStridedBatchedEx; a host test
// (tests/cuda/cublas_gemm_plan_test.cpp) runs the same calls through a reference column-major
// GEMM against the oracle, so the arguments are checked without a GPU. Plain C++: no CUDA header.
//
// cuBLAS is column-major, so it sees each of our row-major matrices transposed; the comment on
// each product says which transposed product it asks for. The n x n matrices (S, P, dP, dS) are
// [batch][head][query][key], row-major. GQA: in bhsd the query rows of the heads that share a K/V
// head are contiguous, so one matrix of group * seq_q rows per (batch, kv head) covers the group
// and one call covers everything; a product that sums over query rows (dV = Pᵀ dO, dK = dSᵀ Q) then
// sums over the group for free. In bshd those rows are not contiguous: one call per (batch, member
// of the group), batched over the kv heads, the members after the first adding into dK and dV.
#pragma once

#include <cstdint>
#include <vector>

#include "harness/core/dtype.h"
#include "harness/core/shape.h"
#include "harness/core/tensor.h"

namespace attnbench::cublas_plan {

enum class Op { plain, transposed };

// One operand of a strided-batched GEMM: the first matrix, its leading dimension (the distance
// between our row-major rows) and the distance to the next matrix, in elements of `dtype`.
struct BatchedOperand {
  const void* data = nullptr;
  DType dtype = DType::fp32;
  int64_t ld = 0;
  int64_t stride = 0;
};

// C = alpha op(A) op(B) + beta C, column-major, `count` times at the operands' strides.
struct GemmCall {
  Op op_a = Op::plain, op_b = Op::plain;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  BatchedOperand a, b;
  float beta = 0.0f;
  BatchedOperand c;
  int64_t count = 0;
};

// One call's slice of the problem: its batch and first query head (a member of the group), the
// query rows of each of its matrices, and how many matrices (kv heads) it batches.
struct GemmSlice {
  int64_t batch = 0, member = 0, rows = 0, count = 0;
};

inline std::vector<GemmSlice> gemm_slices(const Shape& s) {
  if (s.layout == Layout::bhsd) return {{0, 0, s.group_size() * s.seq_q, s.batch * s.kv_heads}};
  std::vector<GemmSlice> slices;
  for (int64_t batch = 0; batch < s.batch; ++batch)
    for (int64_t member = 0; member < s.group_size(); ++member)
      slices.push_back({batch, member, s.seq_q, s.kv_heads});
  return slices;
}

// A tensor's operand for `slice`: query-head tensors (Q, O, dO, dQ) start at the slice's member
// and step a group of heads per matrix; kv-head tensors (K, V, dK, dV) start at head 0 and step
// one head. In bhsd the whole tensor is one run of such matrices.
inline BatchedOperand query_operand(const TensorView& view, const Shape& s,
                                    const GemmSlice& slice) {
  const void* first = s.layout == Layout::bshd ? view.address(slice.batch, slice.member, 0)
                                               : static_cast<const void*>(view.data);
  return {first, view.dtype, view.row_stride, s.group_size() * view.head_stride};
}
inline BatchedOperand kv_operand(const TensorView& view, const Shape& s, const GemmSlice& slice) {
  const void* first = s.layout == Layout::bshd ? view.address(slice.batch, 0, 0)
                                               : static_cast<const void*>(view.data);
  return {first, view.dtype, view.row_stride, view.head_stride};
}
// An n x n matrix (S, P, dP or dS) at `base`, stored in `dtype`, for `slice`.
inline BatchedOperand score_operand(const void* base, DType dtype, const Shape& s,
                                    const GemmSlice& slice) {
  const int64_t first_head = slice.batch * s.heads + slice.member;
  const void* first =
      static_cast<const char*>(base) + first_head * s.seq_q * s.seq_kv * element_bytes(dtype);
  return {first, dtype, s.seq_kv, s.group_size() * s.seq_q * s.seq_kv};
}

// The products that sum over query rows add into what the group's earlier slices wrote.
inline float group_beta(const GemmSlice& slice) { return slice.member == 0 ? 0.0f : 1.0f; }

// S = alpha Q Kᵀ in fp32 (alpha: the scale in log2 units). Column-major: Sᵀ = K Qᵀ.
inline std::vector<GemmCall> score_gemms(const Shape& s, const AttentionViews& t, float* scores,
                                         float alpha) {
  std::vector<GemmCall> calls;
  for (const GemmSlice& slice : gemm_slices(s)) {
    calls.push_back({Op::transposed, Op::plain, s.seq_kv, slice.rows, s.d_k, alpha,
                     kv_operand(t.k, s, slice), query_operand(t.q, s, slice), 0.0f,
                     score_operand(scores, DType::fp32, s, slice), slice.count});
  }
  return calls;
}

// O = P V, P stored in `p_dtype`. Column-major: Oᵀ = Vᵀ Pᵀ.
inline std::vector<GemmCall> output_gemms(const Shape& s, const AttentionViews& t, const void* p,
                                          DType p_dtype) {
  std::vector<GemmCall> calls;
  for (const GemmSlice& slice : gemm_slices(s)) {
    calls.push_back({Op::plain, Op::plain, s.d_v, slice.rows, s.seq_kv, 1.0f,
                     kv_operand(t.v, s, slice), score_operand(p, p_dtype, s, slice), 0.0f,
                     query_operand(t.o, s, slice), slice.count});
  }
  return calls;
}

// dV (+)= Pᵀ dO. Column-major: dVᵀ = dOᵀ P.
inline std::vector<GemmCall> value_gradient_gemms(const Shape& s, const TensorView& dout,
                                                  const TensorView& dv, const void* p,
                                                  DType p_dtype) {
  std::vector<GemmCall> calls;
  for (const GemmSlice& slice : gemm_slices(s)) {
    calls.push_back({Op::plain, Op::transposed, s.d_v, s.seq_kv, slice.rows, 1.0f,
                     query_operand(dout, s, slice), score_operand(p, p_dtype, s, slice),
                     group_beta(slice), kv_operand(dv, s, slice), slice.count});
  }
  return calls;
}

// dP = dO Vᵀ in fp32. Column-major: dPᵀ = V dOᵀ.
inline std::vector<GemmCall> probability_gradient_gemms(const Shape& s, const TensorView& dout,
                                                        const TensorView& v, float* dp) {
  std::vector<GemmCall> calls;
  for (const GemmSlice& slice : gemm_slices(s)) {
    calls.push_back({Op::transposed, Op::plain, s.seq_kv, slice.rows, s.d_v, 1.0f,
                     kv_operand(v, s, slice), query_operand(dout, s, slice), 0.0f,
                     score_operand(dp, DType::fp32, s, slice), slice.count});
  }
  return calls;
}

// dQ = scale dS K and dK (+)= scale dSᵀ Q, dS stored in `ds_dtype`. Column-major: dQᵀ = Kᵀ dSᵀ,
// dKᵀ = Qᵀ dS.
inline std::vector<GemmCall> input_gradient_gemms(const Shape& s, const AttentionViews& t,
                                                  const TensorView& dq, const TensorView& dk,
                                                  const void* ds, DType ds_dtype, float scale) {
  std::vector<GemmCall> calls;
  for (const GemmSlice& slice : gemm_slices(s)) {
    const BatchedOperand ds_operand = score_operand(ds, ds_dtype, s, slice);
    calls.push_back({Op::plain, Op::plain, s.d_k, slice.rows, s.seq_kv, scale,
                     kv_operand(t.k, s, slice), ds_operand, 0.0f, query_operand(dq, s, slice),
                     slice.count});
    calls.push_back({Op::plain, Op::transposed, s.d_k, s.seq_kv, slice.rows, scale,
                     query_operand(t.q, s, slice), ds_operand, group_beta(slice),
                     kv_operand(dk, s, slice), slice.count});
  }
  return calls;
}

}  // namespace attnbench::cublas_plan
