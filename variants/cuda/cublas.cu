// cublas and cublas_tf32: the textbook GPU implementation, the baseline every fused kernel is
// measured against. Three steps over the whole n x n matrix: one strided-batched cuBLAS SGEMM
// writes S = scale * log2(e) * Q Kᵀ for every head, a softmax kernel (a warp per row up to 1024
// keys, a block per row beyond) turns each row into weights in place (row max subtracted, masked
// keys exactly 0, two passes over the row), and a second batched GEMM computes O = P V. GQA costs
// nothing extra: the query rows of the heads sharing a K/V head are contiguous, so each (batch, kv
// head) is one GEMM of group * seq_q rows, and one batched call covers all of them. The weights are
// returned for free: S is the caller's weights buffer when one is given. cublas does strict FP32
// arithmetic (default math: no TF32); cublas_tf32 lets the two GEMMs round their inputs to TF32 on
// the tensor cores (about 1e-3 relative error, several times the speed). In bf16 and fp16 (cublas
// only) both GEMMs run on the tensor cores with fp32 accumulation (cublasGemmStridedBatchedEx,
// CUBLAS_COMPUTE_32F): S is written in fp32, the softmax writes P rounded to the dtype (as
// FlashAttention does before P V) beside the fp32 weights, and O is written in the dtype. In the
// bshd layout the query rows of a GQA group are not contiguous, so the GEMMs are issued per (batch,
// member of the group), each batched over the kv heads. Over the CPU rungs: the GPU's arithmetic
// and bandwidth, through a vendor GEMM. Time: 4 * seq_q * seq_kv * d flops per head in the GEMMs,
// plus about three passes of seq_q * seq_kv floats through memory (GEMM write, softmax
// read-read-write, GEMM read), which dominate at small d. Memory: O(n^2): the batch * heads * seq_q
// * seq_kv scores, plus cuBLAS's 32 MiB workspace. The GEMMs' arguments are data
// (cublas_gemm_plan.h), checked on the host against the oracle.
// Backward (pass bwd, fwd_bwd): the forward keeps P (fp32, and its bf16/fp16 copy); five more
// batched GEMMs, dV = Pᵀ dO, dP = dO Vᵀ, dQ = scale dS K and dK = scale dSᵀ Q (summed over a GQA
// group by the GEMM's own reduction), around a row kernel for D = rowsum(dO o O) and an
// elementwise one for dS = P o (dP - D), rounded to the dtype for its two GEMMs as FlashAttention
// rounds it. 2.5 times the forward's flops; O(n^2) kept for backward and as much again of scratch.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/cuda/attention_params.h"
#include "harness/cuda/cublas_library.h"
#include "harness/cuda/cuda_check.h"
#include "harness/cuda/dispatch.h"
#include "harness/cuda/launch_math.h"
#include "harness/variant/registry.h"
#include "variants/cuda/cublas_gemm_plan.h"

namespace attnbench {
namespace {

constexpr int kSoftmaxThreads = 256;
// cuBLAS's recommended workspace on Hopper (4 MiB suffices before it).
constexpr std::size_t kCublasWorkspaceBytes = std::size_t{32} << 20;

// The (max, sum) state of this thread's part of a row, merged over the block.
__device__ launch::SoftmaxState block_merge(launch::SoftmaxState state,
                                            launch::SoftmaxState* shared) {
  for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1) {
    const launch::SoftmaxState other{__shfl_xor_sync(0xffffffffu, state.max, lane_mask),
                                     __shfl_xor_sync(0xffffffffu, state.sum, lane_mask)};
    state = launch::merge_states(state, other);
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) shared[warp] = state;
  __syncthreads();
  if (warp == 0) {
    state = lane < kSoftmaxThreads / 32 ? shared[lane] : launch::SoftmaxState{-INFINITY, 0.0f};
    for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1) {
      const launch::SoftmaxState other{__shfl_xor_sync(0xffffffffu, state.max, lane_mask),
                                       __shfl_xor_sync(0xffffffffu, state.sum, lane_mask)};
      state = launch::merge_states(state, other);
    }
    if (lane == 0) shared[0] = state;
  }
  __syncthreads();
  return shared[0];
}

// The narrow copy of P for the second GEMM in bf16/fp16; fp32 keeps P in place only.
template <typename Narrow>
__device__ void store_narrow(Narrow* narrow, int64_t index, float value) {
  narrow[index] = static_cast<Narrow>(value);
}
template <>
__device__ void store_narrow<float>(float*, int64_t, float) {}

// The keys [0, result) that row `row` of S sees. Rows are [batch][head][position], so position =
// row % seq_q; the causal mask is the only one cublas takes.
__device__ __forceinline__ int softmax_visible_keys(const AttentionParams& p, int64_t row) {
  return static_cast<int>(
      launch::visible_keys(row % p.seq_q, p.seq_q, p.seq_kv, p.mask.kind == MaskKind::causal));
}

// One block per row of S (for rows longer than kWarpPerRowMaxKeys; already in log2 units): P =
// exp2(S - max) / sum over the visible keys, exactly 0 past the causal horizon. With a Narrow
// type other than float, P is also written rounded to it into `narrow`.
template <typename Narrow>
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_rows_kernel(const AttentionParams p, float* scores, Narrow* narrow) {
  __shared__ launch::SoftmaxState partial[kSoftmaxThreads / 32];
  const int64_t row = blockIdx.x;
  const int seq_kv = p.seq_kv;
  float* x = scores + row * seq_kv;
  const int visible = softmax_visible_keys(p, row);

  // One pass for max and sum together: the sum is rescaled whenever the max grows.
  launch::SoftmaxState state{-INFINITY, 0.0f};
  for (int key = threadIdx.x; key < visible; key += kSoftmaxThreads) {
    const float score = x[key];
    if (score > state.max) {
      state.sum *= exp2f(state.max - score);
      state.max = score;
    }
    state.sum += exp2f(score - state.max);
  }
  state = block_merge(state, partial);
  const float inverse = state.sum > 0.0f ? 1.0f / state.sum : 0.0f;
  for (int key = threadIdx.x; key < seq_kv; key += kSoftmaxThreads) {
    const float p = key < visible ? exp2f(x[key] - state.max) * inverse : 0.0f;
    x[key] = p;
    store_narrow(narrow, row * seq_kv + key, p);
  }
}

// Rows up to this many keys get one warp each (softmax_rows_warp_kernel), longer ones a block: a
// 256-thread block on a 128-key row leaves seven of its eight warps idle.
constexpr int kWarpPerRowMaxKeys = 1024;
constexpr int kSoftmaxWarps = kSoftmaxThreads / 32;

// The same softmax with one warp per row, eight rows per block: the row's (max, sum) merged by
// shuffles alone, no shared memory and no block barrier.
template <typename Narrow>
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_rows_warp_kernel(const AttentionParams p, float* scores, Narrow* narrow, int64_t rows) {
  const int64_t row = int64_t{blockIdx.x} * kSoftmaxWarps + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp: the shuffles below see every lane
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int seq_kv = p.seq_kv;
  float* x = scores + row * seq_kv;
  const int visible = softmax_visible_keys(p, row);

  launch::SoftmaxState state{-INFINITY, 0.0f};
  for (int key = lane; key < visible; key += 32) {
    const float score = x[key];
    if (score > state.max) {
      state.sum *= exp2f(state.max - score);
      state.max = score;
    }
    state.sum += exp2f(score - state.max);
  }
  for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1) {
    const launch::SoftmaxState other{__shfl_xor_sync(0xffffffffu, state.max, lane_mask),
                                     __shfl_xor_sync(0xffffffffu, state.sum, lane_mask)};
    state = launch::merge_states(state, other);
  }
  const float inverse = state.sum > 0.0f ? 1.0f / state.sum : 0.0f;
  for (int key = lane; key < seq_kv; key += 32) {
    const float p = key < visible ? exp2f(x[key] - state.max) * inverse : 0.0f;
    x[key] = p;
    store_narrow(narrow, row * seq_kv + key, p);
  }
}

// The softmax over every row of S, a warp or a block per row by the row's length.
template <typename Narrow>
void launch_softmax(const AttentionParams& params, float* scores, Narrow* narrow,
                    cudaStream_t stream) {
  const int64_t rows = int64_t{params.batch} * params.heads * params.seq_q;
  if (params.seq_kv <= kWarpPerRowMaxKeys) {
    const auto blocks = static_cast<unsigned>(launch::ceil_div(rows, kSoftmaxWarps));
    softmax_rows_warp_kernel<Narrow>
        <<<blocks, kSoftmaxThreads, 0, stream>>>(params, scores, narrow, rows);
    ATTNBENCH_CUDA_CHECK_LAUNCH("softmax_rows_warp_kernel");
    return;
  }
  softmax_rows_kernel<Narrow>
      <<<static_cast<unsigned>(rows), kSoftmaxThreads, 0, stream>>>(params, scores, narrow);
  ATTNBENCH_CUDA_CHECK_LAUNCH("softmax_rows_kernel");
}

// The type the softmax writes P in for the second GEMM: the dtype's, or float (P stays in place).
template <DType kDType>
struct NarrowP {
  using type = float;
};
template <>
struct NarrowP<DType::bf16> {
  using type = __nv_bfloat16;
};
template <>
struct NarrowP<DType::fp16> {
  using type = __half;
};

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::bf16: return CUDA_R_16BF;
    case DType::fp16: return CUDA_R_16F;
    case DType::fp32: break;
  }
  return CUDA_R_32F;
}

cublasOperation_t cublas_op(cublas_plan::Op op) {
  return op == cublas_plan::Op::transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
}

// A row of O or dO in the case's layout, by its index among the batch * heads * seq_q rows.
struct QueryRows {
  const void* data;
  int64_t batch_stride, head_stride, row_stride;
};
QueryRows query_rows(const TensorView& view) {
  return {view.data, view.batch_stride, view.head_stride, view.row_stride};
}
template <typename Element>
__device__ __forceinline__ const Element* query_row(const QueryRows& rows, int64_t row, int heads,
                                                    int seq_q) {
  const int64_t batch = row / (int64_t{heads} * seq_q), head = (row / seq_q) % heads,
                position = row % seq_q;
  return static_cast<const Element*>(rows.data) + batch * rows.batch_stride +
         head * rows.head_stride + position * rows.row_stride;
}

// D_i = dO_i . O_i for every query row (the softmax backward's row term), a warp per row, in fp32.
template <typename Element>
__global__ void __launch_bounds__(kSoftmaxThreads)
    output_dot_kernel(QueryRows out, QueryRows dout, float* row_dot, int64_t rows, int heads,
                      int seq_q, int d_v) {
  const int64_t row = int64_t{blockIdx.x} * kSoftmaxWarps + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp: the shuffles below see every lane
  const int lane = static_cast<int>(threadIdx.x % 32);
  const Element* o = query_row<Element>(out, row, heads, seq_q);
  const Element* d_o = query_row<Element>(dout, row, heads, seq_q);
  float sum = 0.0f;
  for (int c = lane; c < d_v; c += 32) sum += static_cast<float>(o[c]) * static_cast<float>(d_o[c]);
  for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1)
    sum += __shfl_xor_sync(0xffffffffu, sum, lane_mask);
  if (lane == 0) row_dot[row] = sum;
}

// dS = P o (dP - D) over every score, in place on dP (fp32); with a Narrow type other than float,
// also rounded into `narrow` for the dQ and dK GEMMs (as FlashAttention rounds dS). Masked keys
// have P = 0, so their dS is exactly 0.
template <typename Narrow>
__global__ void __launch_bounds__(kSoftmaxThreads)
    score_gradient_kernel(const float* p, float* dp_to_ds, const float* row_dot, Narrow* narrow,
                          int64_t scores, int seq_kv) {
  const int64_t step = int64_t{gridDim.x} * kSoftmaxThreads;
  for (int64_t i = int64_t{blockIdx.x} * kSoftmaxThreads + threadIdx.x; i < scores; i += step) {
    const float ds = p[i] * (dp_to_ds[i] - row_dot[i / seq_kv]);
    dp_to_ds[i] = ds;
    store_narrow(narrow, i, ds);
  }
}

// Both variants; `tf32` chooses the math mode of the GEMMs.
class CublasAttention : public Variant {
 public:
  explicit CublasAttention(bool tf32) : tf32_(tf32) {}
  ~CublasAttention() override {
    if (handle_ != nullptr) static_cast<void>(cublas_library().destroy(handle_));
  }
  CublasAttention(const CublasAttention&) = delete;
  CublasAttention& operator=(const CublasAttention&) = delete;

  VariantInfo info() const override {
    VariantInfo info;
    info.name = tf32_ ? "cublas_tf32" : "cublas";
    info.device = Device::cuda;
    info.summary = tf32_ ? "cuBLAS batched GEMMs on TF32 tensor cores around a softmax kernel; "
                           "materialises the n x n scores"
                         : "cuBLAS batched SGEMMs (strict FP32) around a softmax kernel; "
                           "materialises the n x n scores";
    info.capabilities.causal = true;
    info.capabilities.gqa = true;
    info.capabilities.returns_weights = true;
    info.capabilities.backward = true;
    info.capabilities.precision = tf32_ ? Precision::tf32 : Precision::fp32;
    // TF32 rounds fp32 inputs: it has no meaning for inputs that are already bf16 or fp16.
    info.capabilities.dtypes = tf32_ ? std::vector<DType>{DType::fp32} : all_dtypes();
    info.capabilities.layouts = all_layouts();
    info.capabilities.max_d = 0;
    return info;
  }

  // fp32 scores (the weights), their narrow copy in bf16/fp16, and cuBLAS's workspace; for the
  // backward also dP (then dS) in fp32, dS's narrow copy and each row's D.
  std::size_t workspace_bytes(const Shape& shape) const override {
    std::size_t bytes = score_bytes(shape) + narrow_bytes(shape) + kCublasWorkspaceBytes;
    if (needs_backward(shape.pass))
      bytes += score_bytes(shape) + narrow_bytes(shape) + row_dot_bytes(shape);
    return bytes;
  }

  // The forward's P, kept: fp32, and its narrow copy in bf16/fp16 (O(n^2) per head).
  std::size_t saved_for_backward_bytes(const Shape& shape) const override {
    return needs_backward(shape.pass) ? score_bytes(shape) + narrow_bytes(shape) : 0;
  }

  void prepare(const Shape& shape, Workspace& workspace) override {
    refuse_unsupported(info(), shape);
    constexpr int64_t int_max = std::numeric_limits<int>::max();
    const int64_t rows = shape.group_size() * shape.seq_q;
    // The leading dimensions too: under bshd a row of Q or O is heads * d floats apart.
    const int64_t widest_row =
        shape.layout == Layout::bshd ? shape.heads * std::max(shape.d_k, shape.d_v) : 0;
    if (rows > int_max || shape.seq_kv > int_max || shape.d_k > int_max || shape.d_v > int_max ||
        widest_row > int_max || shape.batch * shape.kv_heads > int_max) {
      throw std::runtime_error("cublas: GEMM dimensions must fit in 32-bit ints");
    }
    const std::string grid_problem =
        launch::grid_limit_problem(shape.batch * shape.heads * shape.seq_q, 1, 1);
    if (!grid_problem.empty()) throw std::runtime_error("cublas softmax: " + grid_problem);
    if (handle_ == nullptr) ATTNBENCH_CUBLAS_CHECK(cublas_library().create(&handle_));
    ATTNBENCH_CUBLAS_CHECK(cublas_library().set_math_mode(
        handle_, tf32_ ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    scores_ = workspace.allocate_array<float>(static_cast<std::size_t>(shape.weight_elements()));
    narrow_p_ = shape.dtype == DType::fp32 ? nullptr : workspace.allocate(narrow_bytes(shape));
    cublas_workspace_ = workspace.allocate(kCublasWorkspaceBytes);
    ds_ = nullptr;
    narrow_ds_ = nullptr;
    row_dot_ = nullptr;
    if (needs_backward(shape.pass)) {
      ds_ = workspace.allocate_array<float>(static_cast<std::size_t>(shape.weight_elements()));
      if (shape.dtype != DType::fp32) narrow_ds_ = workspace.allocate(narrow_bytes(shape));
      row_dot_ = workspace.allocate_array<float>(
          static_cast<std::size_t>(shape.batch * shape.heads * shape.seq_q));
    }
    backward_ready_ = false;
    // Handle set-up belongs here, outside the timed run: the stream is the executor's, fixed for
    // the executor's life, and the workspace is ours. run() only checks that the stream is the
    // one it was given before.
    stream_set_ = false;
  }

  void run(const Problem& problem) override {
    if (handle_ == nullptr) throw std::runtime_error("cublas: run() before prepare()");
    const Shape& s = problem.shape;
    const auto stream = static_cast<cudaStream_t>(problem.stream);
    use_stream(stream);
    float* scores = problem.weights != nullptr ? problem.weights : scores_;
    run_gemms(cublas_plan::score_gemms(s, problem.tensors, scores, problem.scale * launch::kLog2e));

    const AttentionParams params = make_attention_params(problem, nullptr);
    dispatch::with_dtype<DType::fp32, DType::bf16, DType::fp16>(s.dtype, "cublas", [&](auto dtype) {
      using Narrow = typename NarrowP<decltype(dtype)::value>::type;
      launch_softmax(params, scores, static_cast<Narrow*>(narrow_p_), stream);
    });

    // O = P V, P in the dtype (fp32 in place, else the narrow copy).
    const void* p = s.dtype == DType::fp32 ? static_cast<const void*>(scores) : narrow_p_;
    run_gemms(cublas_plan::output_gemms(s, problem.tensors, p, s.dtype));

    if (needs_backward(s.pass)) {
      // The weights are the caller's buffer: the backward reads its own copy of P.
      if (scores != scores_) {
        ATTNBENCH_CUDA_CHECK(
            cudaMemcpyAsync(scores_, scores, score_bytes(s), cudaMemcpyDeviceToDevice, stream));
      }
      backward_ready_ = true;
    }
  }

  // dV = Pᵀ dO, dP = dO Vᵀ, D = rowsum(dO o O), dS = P o (dP - D), dQ = scale dS K and
  // dK = scale dSᵀ Q: five GEMMs (2.5 times the forward's flops) and two passes over the n x n
  // matrices between them. A backward reads only what the forward kept and writes its own
  // scratch, so backwards may follow one forward back to back.
  void run_backward(const BackwardProblem& problem) override {
    if (!backward_ready_)
      throw std::runtime_error("cublas: backward before a forward on a shape prepared for it");
    const Shape& s = problem.shape;
    const auto stream = static_cast<cudaStream_t>(problem.stream);
    use_stream(stream);
    const bool fp32 = s.dtype == DType::fp32;
    const void* p = fp32 ? static_cast<const void*>(scores_) : narrow_p_;
    run_gemms(cublas_plan::value_gradient_gemms(s, problem.dout, problem.dv, p, s.dtype));
    run_gemms(cublas_plan::probability_gradient_gemms(s, problem.dout, problem.tensors.v, ds_));

    const int64_t rows = s.batch * s.heads * s.seq_q, scores = s.weight_elements();
    const auto row_blocks = static_cast<unsigned>(launch::ceil_div(rows, kSoftmaxWarps));
    const auto score_blocks = static_cast<unsigned>(
        std::min<int64_t>(launch::ceil_div(scores, kSoftmaxThreads), int64_t{1} << 20));
    dispatch::with_dtype<DType::fp32, DType::bf16, DType::fp16>(s.dtype, "cublas", [&](auto dtype) {
      using Narrow = typename NarrowP<decltype(dtype)::value>::type;
      output_dot_kernel<Narrow><<<row_blocks, kSoftmaxThreads, 0, stream>>>(
          query_rows(problem.tensors.o), query_rows(problem.dout), row_dot_, rows,
          static_cast<int>(s.heads), static_cast<int>(s.seq_q), static_cast<int>(s.d_v));
      ATTNBENCH_CUDA_CHECK_LAUNCH("output_dot_kernel");
      score_gradient_kernel<Narrow><<<score_blocks, kSoftmaxThreads, 0, stream>>>(
          scores_, ds_, row_dot_, static_cast<Narrow*>(narrow_ds_), scores,
          static_cast<int>(s.seq_kv));
      ATTNBENCH_CUDA_CHECK_LAUNCH("score_gradient_kernel");
    });

    const void* ds = fp32 ? static_cast<const void*>(ds_) : narrow_ds_;
    run_gemms(cublas_plan::input_gradient_gemms(s, problem.tensors, problem.dq, problem.dk, ds,
                                                s.dtype, problem.scale));
  }

 private:
  static std::size_t score_bytes(const Shape& shape) {
    return static_cast<std::size_t>(shape.weight_elements()) * sizeof(float);
  }
  // P's (and in the backward dS's) copy in bf16/fp16 for the GEMMs; none in fp32.
  static std::size_t narrow_bytes(const Shape& shape) {
    return shape.dtype == DType::fp32 ? 0
                                      : static_cast<std::size_t>(shape.weight_elements()) *
                                            static_cast<std::size_t>(element_bytes(shape.dtype));
  }
  static std::size_t row_dot_bytes(const Shape& shape) {
    return static_cast<std::size_t>(shape.batch * shape.heads * shape.seq_q) * sizeof(float);
  }

  void use_stream(cudaStream_t stream) {
    if (stream_set_ && stream == stream_) return;
    ATTNBENCH_CUBLAS_CHECK(cublas_library().set_stream(handle_, stream));
    // cublasSetStream resets the workspace to cuBLAS's own pool: hand ours back.
    ATTNBENCH_CUBLAS_CHECK(
        cublas_library().set_workspace(handle_, cublas_workspace_, kCublasWorkspaceBytes));
    stream_ = stream;
    stream_set_ = true;
  }

  // Each call of the plan through cublasGemmStridedBatchedEx, fp32 accumulation; strict FP32
  // unless tf32_.
  void run_gemms(const std::vector<cublas_plan::GemmCall>& calls) {
    const cublasComputeType_t compute = tf32_ ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const auto as_int = [](int64_t value) { return static_cast<int>(value); };
    for (const cublas_plan::GemmCall& call : calls) {
      if (call.a.dtype != call.b.dtype)
        throw std::runtime_error("cublas: a GEMM's two inputs must share a type");
      ATTNBENCH_CUBLAS_CHECK(cublas_library().gemm_strided_batched_ex(
          handle_, cublas_op(call.op_a), cublas_op(call.op_b), as_int(call.m), as_int(call.n),
          as_int(call.k), &call.alpha, call.a.data, cuda_type(call.a.dtype), as_int(call.a.ld),
          call.a.stride, call.b.data, cuda_type(call.b.dtype), as_int(call.b.ld), call.b.stride,
          &call.beta, const_cast<void*>(call.c.data), cuda_type(call.c.dtype), as_int(call.c.ld),
          call.c.stride, as_int(call.count), compute, CUBLAS_GEMM_DEFAULT));
    }
  }

  bool tf32_;
  cublasHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  bool stream_set_ = false;
  float* scores_ = nullptr;  // S, then P; kept for the backward when the pass needs it
  void* narrow_p_ = nullptr;
  void* cublas_workspace_ = nullptr;
  float* ds_ = nullptr;  // dP, then dS (backward only)
  void* narrow_ds_ = nullptr;
  float* row_dot_ = nullptr;  // D_i = dO_i . O_i
  bool backward_ready_ = false;
};

class CublasVariant final : public CublasAttention {
 public:
  CublasVariant() : CublasAttention(false) {}
};

class CublasTf32Variant final : public CublasAttention {
 public:
  CublasTf32Variant() : CublasAttention(true) {}
};

}  // namespace

ATTNBENCH_REGISTER_VARIANT(CublasVariant);
ATTNBENCH_REGISTER_VARIANT(CublasTf32Variant);

}  // namespace attnbench
