// cublas and cublas_tf32: the textbook GPU implementation, the baseline every fused kernel is
// measured against. Three steps over the whole n x n matrix: one strided-batched cuBLAS SGEMM
// writes S = scale * log2(e) * Q Kᵀ for every head, a softmax kernel turns each row into weights
// in place (row max subtracted, masked keys exactly 0, two passes over the row), and a second
// batched GEMM computes O = P V. GQA costs nothing extra: the query rows of the heads sharing a K/V
// head are contiguous, so each (batch, kv head) is one GEMM of group * seq_q rows, and one batched
// call covers all of them. The weights are returned for free: S is the caller's weights buffer
// when one is given.
// cublas does strict FP32 arithmetic (default math: no TF32); cublas_tf32 lets the two GEMMs round
// their inputs to TF32 on the tensor cores (about 1e-3 relative error, several times the speed).
// Over the CPU rungs: the GPU's arithmetic and bandwidth, through a vendor GEMM.
// Time: 4 * seq_q * seq_kv * d flops per head in the GEMMs, plus about three passes of
// seq_q * seq_kv floats through memory (GEMM write, softmax read-read-write, GEMM read), which
// dominate at small d. Memory: O(n^2): the batch * heads * seq_q * seq_kv scores, plus cuBLAS's
// 32 MiB workspace.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "harness/cuda/cuda_check.h"
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

// One block per row of S (already in log2 units): P = exp2(S - max) / sum over the visible keys,
// exactly 0 past the causal horizon. Rows are [batch][head][position], so position = row % seq_q.
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_rows_kernel(float* scores, int seq_q, int seq_kv, int causal) {
  __shared__ launch::SoftmaxState partial[kSoftmaxThreads / 32];
  const int64_t row = blockIdx.x;
  float* x = scores + row * seq_kv;
  const int visible =
      static_cast<int>(launch::visible_keys(row % seq_q, seq_q, seq_kv, causal != 0));

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
    x[key] = key < visible ? exp2f(x[key] - state.max) * inverse : 0.0f;
  }
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
    info.capabilities.max_d = 0;
    return info;
  }

  std::size_t workspace_bytes(const Shape& shape) const override {
    return static_cast<std::size_t>(shape.weight_elements()) * sizeof(float) +
           kCublasWorkspaceBytes;
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
    cublas_workspace_ = workspace.allocate(kCublasWorkspaceBytes);
  }

  void run(const Problem& problem) override {
    if (handle_ == nullptr) throw std::runtime_error("cublas: run() before prepare()");
    const Shape& s = problem.shape;
    const auto stream = static_cast<cudaStream_t>(problem.stream);
    ATTNBENCH_CUBLAS_CHECK(cublasSetStream(handle_, stream));
    // cublasSetStream resets the workspace to cuBLAS's own pool: hand ours back every time.
    ATTNBENCH_CUBLAS_CHECK(cublasSetWorkspace(handle_, cublas_workspace_, kCublasWorkspaceBytes));

    // Per (batch, kv head): the group's query rows Q_g [rows][d_k] (contiguous), its K
    // [seq_kv][d_k], V [seq_kv][d_v], scores S_g [rows][seq_kv] and output O_g [rows][d_v], all
    // row-major. cuBLAS is column-major, so it sees every matrix transposed: Sᵀ = K Q_gᵀ and Oᵀ =
    // Vᵀ Pᵀ.
    const int rows = static_cast<int>(s.group_size() * s.seq_q);
    const int seq_kv = static_cast<int>(s.seq_kv);
    const int d_k = static_cast<int>(s.d_k), d_v = static_cast<int>(s.d_v);
    const int batches = static_cast<int>(s.batch * s.kv_heads);
    const long long q_stride = static_cast<long long>(rows) * d_k;
    const long long k_stride = static_cast<long long>(seq_kv) * d_k;
    const long long v_stride = static_cast<long long>(seq_kv) * d_v;
    const long long s_stride = static_cast<long long>(rows) * seq_kv;
    const long long o_stride = static_cast<long long>(rows) * d_v;
    float* scores = problem.weights != nullptr ? problem.weights : scores_;

    const float score_scale = problem.scale * launch::kLog2e, one = 1.0f, zero = 0.0f;
    ATTNBENCH_CUBLAS_CHECK(cublasSgemmStridedBatched(
        handle_, CUBLAS_OP_T, CUBLAS_OP_N, seq_kv, rows, d_k, &score_scale, problem.k, d_k,
        k_stride, problem.q, d_k, q_stride, &zero, scores, seq_kv, s_stride, batches));

    softmax_rows_kernel<<<static_cast<unsigned>(s.batch * s.heads * s.seq_q), kSoftmaxThreads, 0,
                          stream>>>(scores, static_cast<int>(s.seq_q), seq_kv, s.causal ? 1 : 0);
    ATTNBENCH_CUDA_CHECK_LAUNCH("softmax_rows_kernel");

    ATTNBENCH_CUBLAS_CHECK(cublasSgemmStridedBatched(
        handle_, CUBLAS_OP_N, CUBLAS_OP_N, d_v, rows, seq_kv, &one, problem.v, d_v, v_stride,
        scores, seq_kv, s_stride, &zero, problem.o, d_v, o_stride, batches));
  }

 private:
  bool tf32_;
  cublasHandle_t handle_ = nullptr;
  float* scores_ = nullptr;
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
