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
// * seq_kv scores, plus cuBLAS's 32 MiB workspace.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/cuda/attention_params.h"
#include "harness/cuda/cuda_check.h"
#include "harness/cuda/dispatch.h"
#include "harness/cuda/launch_math.h"
#include "harness/variant/registry.h"

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

// One operand of a strided-batched GEMM: the first matrix, its leading dimension (cuBLAS is
// column-major: the distance between our row-major rows) and the distance to the next matrix.
struct BatchedOperand {
  const void* data;
  int ld;
  long long stride;
};

const void* offset_bytes(const void* base, int64_t elements, DType dtype) {
  return static_cast<const char*>(base) + elements * element_bytes(dtype);
}

// Both variants; `tf32` chooses the math mode of the two GEMMs.
class CublasAttention : public Variant {
 public:
  explicit CublasAttention(bool tf32) : tf32_(tf32) {}
  ~CublasAttention() override {
    if (handle_ != nullptr) static_cast<void>(cublasDestroy(handle_));
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
    info.capabilities.precision = tf32_ ? Precision::tf32 : Precision::fp32;
    // TF32 rounds fp32 inputs: it has no meaning for inputs that are already bf16 or fp16.
    info.capabilities.dtypes = tf32_ ? std::vector<DType>{DType::fp32} : all_dtypes();
    info.capabilities.layouts = all_layouts();
    info.capabilities.max_d = 0;
    return info;
  }

  // fp32 scores (the weights), their narrow copy in bf16/fp16, and cuBLAS's workspace.
  std::size_t workspace_bytes(const Shape& shape) const override {
    return static_cast<std::size_t>(shape.weight_elements()) * sizeof(float) +
           narrow_p_bytes(shape) + kCublasWorkspaceBytes;
  }

  void prepare(const Shape& shape, Workspace& workspace) override {
    constexpr int64_t int_max = std::numeric_limits<int>::max();
    const int64_t rows = shape.group_size() * shape.seq_q;
    if (rows > int_max || shape.seq_kv > int_max || shape.d_k > int_max || shape.d_v > int_max ||
        shape.batch * shape.kv_heads > int_max) {
      throw std::runtime_error("cublas: GEMM dimensions must fit in 32-bit ints");
    }
    const std::string grid_problem =
        launch::grid_limit_problem(shape.batch * shape.heads * shape.seq_q, 1, 1);
    if (!grid_problem.empty()) throw std::runtime_error("cublas softmax: " + grid_problem);
    if (handle_ == nullptr) ATTNBENCH_CUBLAS_CHECK(cublasCreate(&handle_));
    ATTNBENCH_CUBLAS_CHECK(
        cublasSetMathMode(handle_, tf32_ ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    scores_ = workspace.allocate_array<float>(static_cast<std::size_t>(shape.weight_elements()));
    narrow_p_ = shape.dtype == DType::fp32 ? nullptr : workspace.allocate(narrow_p_bytes(shape));
    cublas_workspace_ = workspace.allocate(kCublasWorkspaceBytes);
    // Handle set-up belongs here, outside the timed run: the stream is the executor's, fixed for
    // the executor's life, and the workspace is ours. run() only checks that the stream is the
    // one it was given before.
    stream_set_ = false;
  }

  void run(const Problem& problem) override {
    if (handle_ == nullptr) throw std::runtime_error("cublas: run() before prepare()");
    const Shape& s = problem.shape;
    const auto stream = static_cast<cudaStream_t>(problem.stream);
    if (!stream_set_ || stream != stream_) {
      ATTNBENCH_CUBLAS_CHECK(cublasSetStream(handle_, stream));
      // cublasSetStream resets the workspace to cuBLAS's own pool: hand ours back.
      ATTNBENCH_CUBLAS_CHECK(cublasSetWorkspace(handle_, cublas_workspace_, kCublasWorkspaceBytes));
      stream_ = stream;
      stream_set_ = true;
    }
    float* scores = problem.weights != nullptr ? problem.weights : scores_;
    const float score_scale = problem.scale * launch::kLog2e;
    const int64_t group = s.group_size();

    // S = scale * log2(e) * Q Kᵀ in fp32. cuBLAS is column-major, so it sees every row-major
    // matrix transposed: Sᵀ = K Qᵀ.
    for_each_gemm(s, [&](int64_t batch, int64_t member, int64_t rows, int count) {
      const BatchedOperand q = operand(problem.tensors.q, s.layout, batch, member, group);
      const BatchedOperand k = operand(problem.tensors.k, s.layout, batch, 0, 1);
      const int64_t first_head = batch * s.heads + member;
      gemm(CUBLAS_OP_T, CUBLAS_OP_N, s.seq_kv, rows, s.d_k, score_scale, k, q, cuda_type(s.dtype),
           {scores + first_head * s.seq_q * s.seq_kv, static_cast<int>(s.seq_kv),
            group * s.seq_q * s.seq_kv},
           CUDA_R_32F, count);
    });

    const AttentionParams params = make_attention_params(problem, nullptr);
    dispatch::with_dtype<DType::fp32, DType::bf16, DType::fp16>(s.dtype, "cublas", [&](auto dtype) {
      using Narrow = typename NarrowP<decltype(dtype)::value>::type;
      launch_softmax(params, scores, static_cast<Narrow*>(narrow_p_), stream);
    });

    // O = P V, P in the dtype (fp32 in place, else the narrow copy): Oᵀ = Vᵀ Pᵀ.
    const void* p = s.dtype == DType::fp32 ? static_cast<const void*>(scores) : narrow_p_;
    for_each_gemm(s, [&](int64_t batch, int64_t member, int64_t rows, int count) {
      const int64_t first_head = batch * s.heads + member;
      const BatchedOperand p_operand{offset_bytes(p, first_head * s.seq_q * s.seq_kv, s.dtype),
                                     static_cast<int>(s.seq_kv), group * s.seq_q * s.seq_kv};
      const BatchedOperand v = operand(problem.tensors.v, s.layout, batch, 0, 1);
      const BatchedOperand o = operand(problem.tensors.o, s.layout, batch, member, group);
      gemm(CUBLAS_OP_N, CUBLAS_OP_N, s.d_v, rows, s.seq_kv, 1.0f, v, p_operand, cuda_type(s.dtype),
           o, cuda_type(s.dtype), count);
    });
  }

 private:
  static std::size_t narrow_p_bytes(const Shape& shape) {
    return shape.dtype == DType::fp32 ? 0
                                      : static_cast<std::size_t>(shape.weight_elements()) *
                                            static_cast<std::size_t>(element_bytes(shape.dtype));
  }

  // Calls gemm_call(batch, member, rows, count) once per strided-batched GEMM. bhsd: the query
  // rows of a GQA group's heads are contiguous, so one call covers everything, batched over
  // (batch, kv head) with group * seq_q rows each (batch = member = 0). bshd: one call per
  // (batch, member of the group), batched over the kv heads, seq_q rows each.
  template <typename GemmCall>
  static void for_each_gemm(const Shape& s, GemmCall gemm_call) {
    if (s.layout == Layout::bhsd) {
      gemm_call(0, 0, s.group_size() * s.seq_q, static_cast<int>(s.batch * s.kv_heads));
      return;
    }
    for (int64_t batch = 0; batch < s.batch; ++batch)
      for (int64_t member = 0; member < s.group_size(); ++member)
        gemm_call(batch, member, s.seq_q, static_cast<int>(s.kv_heads));
  }

  // The operand of a tensor for the GEMMs of for_each_gemm: from head `first_head` of `batch`,
  // stepping `head_step` heads per batched matrix. In bhsd (batch = 0) the whole tensor is one
  // run of matrices, one per (batch, kv head) of head_step * seq rows.
  static BatchedOperand operand(const TensorView& view, Layout layout, int64_t batch,
                                int64_t first_head, int64_t head_step) {
    const void* first = layout == Layout::bshd ? view.address(batch, first_head, 0) : view.data;
    return {first, static_cast<int>(view.row_stride), head_step * view.head_stride};
  }

  // C = alpha * op(A) op(B) (column-major, as cuBLAS sees our row-major matrices), fp32
  // accumulation; strict FP32 unless tf32_.
  void gemm(cublasOperation_t op_a, cublasOperation_t op_b, int64_t m, int64_t n, int64_t k,
            float alpha, const BatchedOperand& a, const BatchedOperand& b, cudaDataType_t ab_type,
            const BatchedOperand& c, cudaDataType_t c_type, int count) {
    const float zero = 0.0f;
    const cublasComputeType_t compute = tf32_ ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    ATTNBENCH_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        handle_, op_a, op_b, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), &alpha,
        a.data, ab_type, a.ld, a.stride, b.data, ab_type, b.ld, b.stride, &zero,
        const_cast<void*>(c.data), c_type, c.ld, c.stride, count, compute, CUBLAS_GEMM_DEFAULT));
  }

  bool tf32_;
  cublasHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  bool stream_set_ = false;
  float* scores_ = nullptr;
  void* narrow_p_ = nullptr;
  void* cublas_workspace_ = nullptr;
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
