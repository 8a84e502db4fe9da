// blas: the baseline a user would write with a tuned library at hand. For each (batch, head) two
// GEMMs, S = scale * Q Kᵀ and O = P V, through cblas_sgemm (OpenBLAS when it is found; Eigen's
// GEMM otherwise), with a row softmax in between (max subtracted, causal mask aligned to the end,
// masked weights exactly 0), written as plain loops the compiler vectorises. The (batch, head)
// pairs are shared among OpenMP threads, each calling a single-threaded GEMM: prepare() pins
// OpenBLAS to one thread (openblas_set_num_threads(1), which is process-wide), and Eigen runs
// single-threaded inside an OpenMP parallel region.
// It improves on naive by handing both products to a GEMM that runs near the machine's FMA peak.
// Time: 2 * seq_q * seq_kv * (d_k + d_v) flops per head at GEMM speed, plus the softmax's passes
// over the n x n scores, which stream through memory once they outgrow the caches.
// Memory: one seq_q x seq_kv score matrix per thread, O(n^2) workspace.
// Types: fp32 in either layout straight through the GEMMs' leading dimensions; bf16 and fp16 are
// widened to fp32 per head on load (O(n d) more workspace per thread) and O rounded on store.
// Backward: the forward keeps every head's P (B * H * seq_q * seq_kv floats) when the shape's
// pass needs it; per (batch, key head) the backward is four GEMMs per query head of its group,
// dV += P^T dO, dP = dO V^T, dQ = scale dS K and dK += scale dS^T Q, around the elementwise
// dS = P o (dP - D), D = rowsum(dO o O). Key heads are shared among the threads, so the group's
// sums into dK and dV never race. 2.5x the forward's flops, all but dS at GEMM speed.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "harness/core/element_types.h"
#include "harness/variant/parallel_errors.h"
#include "harness/variant/registry.h"
#include "variants/cpu/register_tiles.h"

#if defined(ATTNBENCH_HAVE_CBLAS)
#include <cblas.h>
#else
#include <Eigen/Core>
#endif

namespace attnbench {
namespace {

#if defined(ATTNBENCH_HAVE_CBLAS) && defined(OPENBLAS_VERSION)
constexpr const char* kGemmName = "OpenBLAS cblas_sgemm";
#elif defined(ATTNBENCH_HAVE_CBLAS)
constexpr const char* kGemmName = "cblas_sgemm";
#else
constexpr const char* kGemmName = "Eigen GEMM";
#endif

// One row of scores (already scaled) into softmax weights in place; keys at and past `visible`
// get weight exactly 0.
void softmax_row(float* row, int64_t visible, int64_t seq_kv) {
  const float sum = cpu_kernels::exp_shifted(row, visible, cpu_kernels::row_max(row, visible));
  const float inverse = 1.0f / sum;
#pragma omp simd
  for (int64_t j = 0; j < visible; ++j) row[j] *= inverse;
  std::fill(row + visible, row + seq_kv, 0.0f);
}

// A row-major matrix operand: its rows are `stride` floats apart (d in bhsd, heads * d in bshd).
struct Operand {
  const float* data;
  int64_t stride;
};

// How a GEMM reads an operand: as stored, or transposed.
enum class Op { plain, transposed };

// C[m x n] = alpha * op(A) * op(B) + beta * C with row-major operands; op(A) is m x k (A stored
// k x m when transposed), op(B) is k x n (B stored n x k when transposed).
void gemm(int64_t m, int64_t n, int64_t k, float alpha, Operand a, Op a_op, Operand b, Op b_op,
          float beta, float* c, int64_t c_stride) {
#if defined(ATTNBENCH_HAVE_CBLAS)
  const auto trans = [](Op op) { return op == Op::transposed ? CblasTrans : CblasNoTrans; };
  cblas_sgemm(CblasRowMajor, trans(a_op), trans(b_op), static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a.data, static_cast<int>(a.stride), b.data,
              static_cast<int>(b.stride), beta, c, static_cast<int>(c_stride));
#else
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Strided = Eigen::OuterStride<>;
  using ConstMap = Eigen::Map<const RowMajor, 0, Strided>;
  const ConstMap a_map(a.data, a_op == Op::transposed ? k : m, a_op == Op::transposed ? m : k,
                       Strided(a.stride));
  const ConstMap b_map(b.data, b_op == Op::transposed ? n : k, b_op == Op::transposed ? k : n,
                       Strided(b.stride));
  Eigen::Map<RowMajor, 0, Strided> c_map(c, m, n, Strided(c_stride));
  if (beta == 0.0f)
    c_map.setZero();
  else
    c_map *= beta;
  const bool at = a_op == Op::transposed, bt = b_op == Op::transposed;
  if (at && bt)
    c_map.noalias() += alpha * (a_map.transpose() * b_map.transpose());
  else if (at)
    c_map.noalias() += alpha * (a_map.transpose() * b_map);
  else if (bt)
    c_map.noalias() += alpha * (a_map * b_map.transpose());
  else
    c_map.noalias() += alpha * (a_map * b_map);
#endif
}

// The forward's C = alpha * A * op(B).
void gemm(int64_t m, int64_t n, int64_t k, float alpha, Operand a, Operand b, bool b_transposed,
          float* c, int64_t c_stride) {
  gemm(m, n, k, alpha, a, Op::plain, b, b_transposed ? Op::transposed : Op::plain, 0.0f, c,
       c_stride);
}

// rows x cols elements of a strided bf16/fp16 matrix widened into a contiguous fp32 one.
void widen_rows(DType dtype, const uint16_t* source, int64_t source_stride, int64_t rows,
                int64_t cols, float* destination) {
  for (int64_t r = 0; r < rows; ++r)
    widen_to_fp32(dtype, source + r * source_stride, destination + r * cols, cols);
}

class BlasVariant final : public Variant {
 public:
  VariantInfo info() const override {
    VariantInfo info;
    info.name = "blas";
    info.device = Device::cpu;
    info.summary = std::string("two GEMMs per head (") + kGemmName +
                   ", one BLAS thread per OpenMP thread) around a vectorised softmax; n x n "
                   "scores per thread";
    info.capabilities.causal = true;
    info.capabilities.gqa = true;
    info.capabilities.returns_weights = true;
    info.capabilities.dtypes = all_dtypes();
    info.capabilities.layouts = all_layouts();
    info.capabilities.backward = true;
    return info;
  }

  std::size_t workspace_bytes(const Shape& s) const override {
    return static_cast<std::size_t>(thread_count(s)) * per_thread_bytes(s) +
           saved_for_backward_bytes(s);
  }

  std::size_t saved_for_backward_bytes(const Shape& s) const override {
    return needs_backward(s.pass) ? static_cast<std::size_t>(s.weight_elements()) * sizeof(float)
                                  : 0;
  }

  // OpenBLAS maps a buffer for each thread that calls it (128 MiB, Debian's OpenBLAS 0.3.21:
  // blas_memory_alloc's mmap, seen in gdb) and, where an address-space limit leaves no room for
  // it, spins for ever in that mmap. What is mapped when the check runs may not yet hold the
  // threads' stacks and malloc arenas (64 MiB of address space each): an OpenMP worker and an
  // OpenBLAS server thread per core come with them, and in one run of ten they had not (65 MiB
  // mapped, not 193). So each calling thread's buffer and every such thread's 72 MiB are asked.
  std::size_t reserved_address_space(const Shape& s) const override {
#if defined(ATTNBENCH_HAVE_CBLAS) && defined(OPENBLAS_VERSION)
    const auto cores = static_cast<std::size_t>(std::max(1, omp_get_max_threads()));
    return static_cast<std::size_t>(thread_count(s)) * kOpenBlasBuffer +
           2 * cores * kThreadAddressSpace;
#else
    (void)s;
    return 0;
#endif
  }

  void prepare(const Shape& s, Workspace& workspace) override {
    refuse_unsupported(info(), s);
#if defined(ATTNBENCH_HAVE_CBLAS) && defined(OPENBLAS_VERSION)
    // Parallelism comes from the OpenMP loop over heads; a threaded GEMM inside it would
    // oversubscribe the cores.
    openblas_set_num_threads(1);
#endif
    threads_ = thread_count(s);
    per_thread_floats_ = per_thread_bytes(s) / sizeof(float);
    scratch_ =
        workspace.allocate_array<float>(static_cast<std::size_t>(threads_) * per_thread_floats_);
    saved_weights_ =
        needs_backward(s.pass)
            ? workspace.allocate_array<float>(static_cast<std::size_t>(s.weight_elements()))
            : nullptr;
  }

  void run(const Problem& p) override {
    const Shape& s = p.shape;
    for_each_with_scratch(s.batch * s.heads, [&](int64_t bh, float* scratch) {
      if (s.dtype == DType::fp32) {
        const HeadView<float> head = p.head<float>(bh / s.heads, bh % s.heads);
        one_head(s, p.scale, {head.q, head.q_row_stride}, {head.k, head.k_row_stride},
                 {head.v, head.v_row_stride}, head.o, head.o_row_stride, head.weights,
                 scores_of(s, bh, scratch));
        keep_weights(s, bh, head.weights);
        return;
      }
      // bf16/fp16: the head's Q, K and V widened to fp32 once, the GEMMs in fp32, O rounded to
      // the dtype as it is stored.
      const HeadView<uint16_t> head = p.head<uint16_t>(bh / s.heads, bh % s.heads);
      float* q = scratch + s.seq_q * s.seq_kv;
      float* k = q + s.seq_q * s.d_k;
      float* v = k + s.seq_kv * s.d_k;
      float* o = v + s.seq_kv * s.d_v;
      widen_rows(s.dtype, head.q, head.q_row_stride, s.seq_q, s.d_k, q);
      widen_rows(s.dtype, head.k, head.k_row_stride, s.seq_kv, s.d_k, k);
      widen_rows(s.dtype, head.v, head.v_row_stride, s.seq_kv, s.d_v, v);
      one_head(s, p.scale, {q, s.d_k}, {k, s.d_k}, {v, s.d_v}, o, s.d_v, head.weights,
               scores_of(s, bh, scratch));
      keep_weights(s, bh, head.weights);
      for (int64_t r = 0; r < s.seq_q; ++r)
        narrow_from_fp32(s.dtype, o + r * s.d_v, head.o + r * head.o_row_stride, s.d_v);
    });
  }

  void run_backward(const BackwardProblem& p) override {
    const Shape& s = p.shape;
    if (saved_weights_ == nullptr)
      throw std::runtime_error("blas: backward on a shape prepared without its pass");
    // One KV head's group on one thread: its members add into the same dK and dV.
    for_each_with_scratch(s.batch * s.kv_heads, [&](int64_t bg, float* scratch) {
      for (int64_t member = 0; member < s.group_size(); ++member)
        backward_head(p, bg / s.kv_heads, (bg % s.kv_heads) * s.group_size() + member,
                      member == 0 ? 0.0f : 1.0f, scratch);
    });
  }

 private:
  // body(i, scratch) for i in [0, count) on the OpenMP threads, each with its thread's scratch;
  // the first exception a body throws is rethrown here, once every thread has stopped.
  template <class Body>
  void for_each_with_scratch(int64_t count, Body body) {
    ParallelErrors errors;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads_)
    for (int64_t i = 0; i < count; ++i) {
      errors.capture([&] {
        body(i, scratch_ + static_cast<std::size_t>(omp_get_thread_num()) * per_thread_floats_);
      });
    }
    errors.rethrow_first();
  }

  static constexpr std::size_t kOpenBlasBuffer = std::size_t{128} << 20;
  static constexpr std::size_t kThreadAddressSpace = std::size_t{72} << 20;  // arena and stack

  static int thread_count(const Shape& s) {
    return static_cast<int>(
        std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), s.batch * s.heads)));
  }
  // The scores (dS in the backward), and for bf16/fp16 the fp32 copies of one head's Q, K, V and
  // O (and dO for the backward).
  static std::size_t per_thread_bytes(const Shape& s) {
    int64_t floats = s.seq_q * s.seq_kv;
    if (s.dtype != DType::fp32)
      floats += s.seq_q * s.d_k + s.seq_kv * (s.d_k + s.d_v) + s.seq_q * s.d_v;
    if (s.dtype != DType::fp32 && needs_backward(s.pass)) floats += s.seq_q * s.d_v;
    return static_cast<std::size_t>(floats) * sizeof(float);
  }

  // Where head bh's weights are built: kept for the backward, or the thread's scratch.
  float* scores_of(const Shape& s, int64_t bh, float* scratch) const {
    return saved_weights_ == nullptr ? scratch : saved_weights_ + bh * s.seq_q * s.seq_kv;
  }
  // With weights asked for, one_head built them in the caller's buffer: the backward keeps a copy.
  void keep_weights(const Shape& s, int64_t bh, const float* weights) const {
    if (weights != nullptr && saved_weights_ != nullptr)
      std::copy(weights, weights + s.seq_q * s.seq_kv, saved_weights_ + bh * s.seq_q * s.seq_kv);
  }

  // A head's rows as fp32: straight from the tensor for fp32, widened into `copy` otherwise.
  static Operand fp32_rows(const TensorView& view, int64_t b, int64_t h, int64_t rows,
                           float* copy) {
    if (view.dtype == DType::fp32) return {view.row<const float>(b, h, 0), view.row_stride};
    widen_rows(view.dtype, view.row<const uint16_t>(b, h, 0), view.row_stride, rows, view.dim,
               copy);
    return {copy, view.dim};
  }

  // Query head h's part of the gradients; dK and dV are overwritten when beta is 0 (the group's
  // first head), added to when it is 1.
  void backward_head(const BackwardProblem& p, int64_t b, int64_t h, float beta,
                     float* scratch) const {
    const Shape& s = p.shape;
    const int64_t g = h / s.group_size();
    float* ds = scratch;
    float* copies = scratch + s.seq_q * s.seq_kv;
    const Operand q = fp32_rows(p.tensors.q, b, h, s.seq_q, copies);
    const Operand k = fp32_rows(p.tensors.k, b, g, s.seq_kv, copies + s.seq_q * s.d_k);
    const Operand v =
        fp32_rows(p.tensors.v, b, g, s.seq_kv, copies + s.seq_q * s.d_k + s.seq_kv * s.d_k);
    float* after_v = copies + s.seq_q * s.d_k + s.seq_kv * (s.d_k + s.d_v);
    const Operand o = fp32_rows(p.tensors.o, b, h, s.seq_q, after_v);
    const Operand dout = fp32_rows(p.dout, b, h, s.seq_q, after_v + s.seq_q * s.d_v);
    const Operand weights{saved_weights_ + (b * s.heads + h) * s.seq_q * s.seq_kv, s.seq_kv};
    float* dq = p.dq.row<float>(b, h, 0);
    float* dk = p.dk.row<float>(b, g, 0);
    float* dv = p.dv.row<float>(b, g, 0);

    // dV (+)= P^T dO.
    gemm(s.seq_kv, s.d_v, s.seq_q, 1.0f, weights, Op::transposed, dout, Op::plain, beta, dv,
         p.dv.row_stride);
    // dP = dO V^T, then dS = P o (dP - D) in place, D_i = dO_i . O_i.
    gemm(s.seq_q, s.seq_kv, s.d_v, 1.0f, dout, Op::plain, v, Op::transposed, 0.0f, ds, s.seq_kv);
    for (int64_t i = 0; i < s.seq_q; ++i) {
      float d_term = 0.0f;
      for (int64_t c = 0; c < s.d_v; ++c)
        d_term += dout.data[i * dout.stride + c] * o.data[i * o.stride + c];
      const float* p_row = weights.data + i * s.seq_kv;
      float* ds_row = ds + i * s.seq_kv;
#pragma omp simd
      for (int64_t j = 0; j < s.seq_kv; ++j) ds_row[j] = p_row[j] * (ds_row[j] - d_term);
    }
    // dQ = scale dS K; dK (+)= scale dS^T Q.
    gemm(s.seq_q, s.d_k, s.seq_kv, p.scale, {ds, s.seq_kv}, Op::plain, k, Op::plain, 0.0f, dq,
         p.dq.row_stride);
    gemm(s.seq_kv, s.d_k, s.seq_q, p.scale, {ds, s.seq_kv}, Op::transposed, q, Op::plain, beta, dk,
         p.dk.row_stride);
  }

  static void one_head(const Shape& s, float scale, Operand q, Operand k, Operand v, float* o,
                       int64_t o_stride, float* weights, float* scratch) {
    // With weights asked for, the scores are built in place in the caller's buffer.
    float* scores = weights != nullptr ? weights : scratch;
    gemm(s.seq_q, s.seq_kv, s.d_k, scale, q, k, true, scores, s.seq_kv);
    for (int64_t i = 0; i < s.seq_q; ++i) {
      const int64_t visible = std::clamp<int64_t>(s.visible_keys(i), 0, s.seq_kv);
      softmax_row(scores + i * s.seq_kv, visible, s.seq_kv);
    }
    gemm(s.seq_q, s.d_v, s.seq_kv, 1.0f, {scores, s.seq_kv}, v, false, o, o_stride);
  }

  int threads_ = 1;
  std::size_t per_thread_floats_ = 0;
  float* scratch_ = nullptr;
  float* saved_weights_ = nullptr;  // every head's P, kept for the backward (null for fwd)
};

}  // namespace

ATTNBENCH_REGISTER_VARIANT(BlasVariant);

}  // namespace attnbench
