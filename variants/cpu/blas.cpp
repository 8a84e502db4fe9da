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
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "harness/registry.h"

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

// exp(x) for x <= 0 (scores after the row max is subtracted), to about 2e-7 relative. Plain
// arithmetic, so the loops that call it vectorise (std::exp would be a scalar call per element):
// exp(x) = 2^t with t = x log2(e) = n + f, n an integer, |f| <= 1/2; 2^f by a degree-5
// polynomial fitted for relative error; 2^n written straight into the exponent bits. t is
// clamped at -127, where the exponent field becomes 0 and the result exactly 0.
inline float exp_nonpositive(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  float t = x * kLog2e;
  t = t < -127.0f ? -127.0f : t;
  const float n = (t + kRoundMagic) - kRoundMagic;
  const float f = t - n;
  float p = 1.3218672e-3f;
  p = p * f + 9.6716983e-3f;
  p = p * f + 5.5508930e-2f;
  p = p * f + 2.4022238e-1f;
  p = p * f + 6.9314688e-1f;
  p = p * f + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) * (1 << 23);
  float two_to_n;
  std::memcpy(&two_to_n, &bits, sizeof two_to_n);
  return p * two_to_n;
}

// One row of scores (already scaled) into softmax weights in place; keys at and past `visible`
// get weight exactly 0.
void softmax_row(float* row, int64_t visible, int64_t seq_kv) {
  float row_max = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : row_max)
  for (int64_t j = 0; j < visible; ++j) row_max = std::max(row_max, row[j]);
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < visible; ++j) {
    row[j] = exp_nonpositive(row[j] - row_max);
    sum += row[j];
  }
  const float inverse = 1.0f / sum;
#pragma omp simd
  for (int64_t j = 0; j < visible; ++j) row[j] *= inverse;
  std::fill(row + visible, row + seq_kv, 0.0f);
}

// C[m x n] = alpha * A[m x k] * op(B) with row-major operands; op(B) is Bᵀ (B stored n x k) when
// `b_transposed`, else B (stored k x n).
void gemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
          bool b_transposed, float* c) {
#if defined(ATTNBENCH_HAVE_CBLAS)
  cblas_sgemm(CblasRowMajor, CblasNoTrans, b_transposed ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(k), b, static_cast<int>(b_transposed ? k : n), 0.0f, c,
              static_cast<int>(n));
#else
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::Map<const RowMajor> a_map(a, m, k);
  Eigen::Map<RowMajor> c_map(c, m, n);
  if (b_transposed) {
    c_map.noalias() = alpha * (a_map * Eigen::Map<const RowMajor>(b, n, k).transpose());
  } else {
    c_map.noalias() = alpha * (a_map * Eigen::Map<const RowMajor>(b, k, n));
  }
#endif
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
    return info;
  }

  std::size_t workspace_bytes(const Shape& s) const override {
    return static_cast<std::size_t>(thread_count(s)) * scores_bytes(s);
  }

  void prepare(const Shape& s, Workspace& workspace) override {
#if defined(ATTNBENCH_HAVE_CBLAS) && defined(OPENBLAS_VERSION)
    // Parallelism comes from the OpenMP loop over heads; a threaded GEMM inside it would
    // oversubscribe the cores.
    openblas_set_num_threads(1);
#endif
    threads_ = thread_count(s);
    scores_ = workspace.allocate_array<float>(static_cast<std::size_t>(threads_) * scores_bytes(s) /
                                              sizeof(float));
  }

  void run(const Problem& p) override {
    const Shape& s = p.shape;
    const int64_t heads_total = s.batch * s.heads;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads_)
    for (int64_t bh = 0; bh < heads_total; ++bh) {
      const int64_t b = bh / s.heads;
      const int64_t h = bh % s.heads;
      const int64_t kv = b * s.kv_heads + h / s.group_size();
      const float* q = p.q + bh * s.seq_q * s.d_k;
      const float* k = p.k + kv * s.seq_kv * s.d_k;
      const float* v = p.v + kv * s.seq_kv * s.d_v;
      float* o = p.o + bh * s.seq_q * s.d_v;
      // With weights asked for, the scores are built in place in the caller's buffer.
      float* scores = p.weights != nullptr ? p.weights + bh * s.seq_q * s.seq_kv
                                           : scores_ + omp_get_thread_num() * s.seq_q * s.seq_kv;
      gemm(s.seq_q, s.seq_kv, s.d_k, p.scale, q, k, true, scores);
      for (int64_t i = 0; i < s.seq_q; ++i) {
        const int64_t visible = std::clamp<int64_t>(s.visible_keys(i), 0, s.seq_kv);
        softmax_row(scores + i * s.seq_kv, visible, s.seq_kv);
      }
      gemm(s.seq_q, s.d_v, s.seq_kv, 1.0f, scores, v, false, o);
    }
  }

 private:
  static int thread_count(const Shape& s) {
    return static_cast<int>(
        std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), s.batch * s.heads)));
  }
  static std::size_t scores_bytes(const Shape& s) {
    return static_cast<std::size_t>(s.seq_q * s.seq_kv) * sizeof(float);
  }

  int threads_ = 1;
  float* scores_ = nullptr;
};

}  // namespace

ATTNBENCH_REGISTER_VARIANT(BlasVariant);

}  // namespace attnbench
