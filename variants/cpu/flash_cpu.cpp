// flash_cpu: fused, flash-style attention for the CPU. Each thread takes one block of 96 query
// rows of one head and walks its visible keys in blocks of 48, never holding more than a 48 x 96
// score tile: S = Q Kᵀ for the tile by a register-blocked micro-kernel (which also leaves the
// tile's column max behind), an online softmax on the tile while it is hot in L1 (running row max
// and sum; the accumulator is rescaled when the max grows), then O = alpha O + P V by a second
// micro-kernel; O is divided by the row sums once, at the end. Both micro-kernels keep a
// rows x (2 vectors) tile of accumulators in registers and feed it with one broadcast and two
// vector loads per step: 6 x 16 on AVX2 (15 of 16 ymm), 12 x 32 on AVX-512 (27 of 32 zmm). They are
// written once over a small SIMD interface and compiled for AVX-512, AVX2 and plain scalar code;
// the best the CPU supports is picked at run time (ATTNBENCH_FLASH_CPU_ISA = scalar | avx2 |
// avx512 overrides it, read in prepare()).
// It improves on blas by never writing the n x n scores to memory: the max, the exp and the sum
// run on a tile in L1 instead of streaming n² floats through memory between the GEMMs, and causal
// tiles above the diagonal are skipped instead of computed and thrown away.
// Time: 2 * seq_q * seq_kv * (d_k + d_v) flops (about half of it under a causal mask), plus one
// exp2 per score: a degree-5 polynomial after range reduction, 11 vector ops per vector of scores
// against the (d_k + d_v) FMAs each score costs in the two products.
// Memory: per thread, Qᵀ of a query block, one score tile, the O accumulator of a query block and
// one padded V block: O(d) per thread, independent of the sequence lengths.
//
// Block sizes. The score tile (48 keys x 96 queries, 18 KiB) stays in L1 (32 KiB) from the
// S kernel through the softmax to the P V kernel. The query block's Qᵀ (d_k x 96) and O
// accumulator (96 x d_v), 24 KiB each at d = 64, stay in L1/L2 (1 MiB) while every key block
// reuses them; K and V are read once per query block, so each K/V element fetched from L2/L3
// serves 96 query rows. The micro-kernels do 12 FMAs per 2 vector loads, so operands coming from
// L2 rather than L1 (d = 128 and up) do not starve them. 96 is a whole number of query strips for
// every ISA (16 for AVX2, 32 for AVX-512), 48 a whole number of key row groups (6 and 12).
//
// The file includes itself once per ISA (the #else branch at the bottom): each copy of the
// kernels is compiled inside a `#pragma GCC target` region for its ISA (GCC cannot give a
// template a target chosen by its parameter), so the code is written once and a portable build
// still has AVX-512 and AVX2 copies to choose from at run time.
#ifndef ATTNBENCH_FLASH_CPU_KERNELS

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>

#include "harness/core/element.h"
#include "harness/variant/registry.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ATTNBENCH_FLASH_CPU_X86 1
#endif

namespace attnbench {
namespace {
namespace flash_cpu {

constexpr int64_t kQueryBlock = 96;
constexpr int64_t kKeyBlock = 48;
constexpr int64_t kMaxWidth = 16;  // floats in the widest vector; row strides are padded to it

enum class Isa { scalar, avx2, avx512 };

const char* to_string(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "?";
}

bool isa_supported(Isa isa) {
#if defined(ATTNBENCH_FLASH_CPU_X86)
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c");
    case Isa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
             __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  }
  return false;
#else
  return isa == Isa::scalar;
#endif
}

Isa best_isa() {
  if (isa_supported(Isa::avx512)) return Isa::avx512;
  if (isa_supported(Isa::avx2)) return Isa::avx2;
  return Isa::scalar;
}

// The ISA prepare() selects: ATTNBENCH_FLASH_CPU_ISA when set, else the best the CPU has.
Isa selected_isa() {
  const char* requested = std::getenv("ATTNBENCH_FLASH_CPU_ISA");
  if (requested == nullptr || *requested == '\0') return best_isa();
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (std::string(requested) != to_string(isa)) continue;
    if (!isa_supported(isa))
      throw std::runtime_error(std::string("flash_cpu: ATTNBENCH_FLASH_CPU_ISA=") + requested +
                               " but this CPU does not support it");
    return isa;
  }
  throw std::runtime_error(std::string("flash_cpu: ATTNBENCH_FLASH_CPU_ISA=") + requested +
                           " is not one of scalar, avx2, avx512");
}

int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// One forward pass, as every block of work sees it. Query blocks are numbered item = 0 ..
// batch * heads * query_blocks - 1.
struct Job {
  Shape shape;
  float scale_log2;        // scale * log2(e): the kernels work in base 2
  AttentionViews tensors;  // Q, K, V, O in shape.dtype and shape.layout
  int64_t query_blocks;
  int64_t dv_stride;  // row stride of the O accumulator and of packed V
};

// One thread's scratch, carved from the workspace in prepare().
struct Scratch {
  float* q_t;        // [d_k][kQueryBlock]: the query block transposed, pre-scaled by scale_log2
  float* scores;     // [kKeyBlock][kQueryBlock]: scores, then probabilities, key-major
  float* out;        // [kQueryBlock][dv_stride]: unnormalised O of the query block
  float* k_packed;   // [kKeyBlock][d_k]: a K block widened to fp32 / made contiguous, when needed
  float* v_packed;   // [kKeyBlock][dv_stride]: a V block with zero-padded rows, when d_v needs it
  float* row_max;    // [kQueryBlock]: running max of the (base-2) scores per query
  float* row_sum;    // [kQueryBlock]: running sum of exp2(score - row_max) per query
  float* alpha;      // [kQueryBlock]: rescale factor of the accumulator for this key block
  float* block_max;  // [kQueryBlock]: max of this key block's scores per query
};

struct ScratchLayout {
  int64_t q_t, scores, out, k_packed, v_packed, stats, per_thread;  // floats, multiples of 16

  explicit ScratchLayout(const Shape& s) {
    const int64_t dv_stride = round_up(s.d_v, kMaxWidth);
    q_t = s.d_k * kQueryBlock;
    scores = kKeyBlock * kQueryBlock;
    out = kQueryBlock * dv_stride;
    k_packed = kKeyBlock * round_up(s.d_k, kMaxWidth);
    v_packed = kKeyBlock * dv_stride;
    stats = 4 * kQueryBlock;
    per_thread = q_t + scores + out + k_packed + v_packed + stats;
  }

  Scratch carve(float* base) const {
    Scratch scratch;
    scratch.q_t = base;
    scratch.scores = scratch.q_t + q_t;
    scratch.out = scratch.scores + scores;
    scratch.k_packed = scratch.out + out;
    scratch.v_packed = scratch.k_packed + k_packed;
    scratch.row_max = scratch.v_packed + v_packed;
    scratch.row_sum = scratch.row_max + kQueryBlock;
    scratch.alpha = scratch.row_sum + kQueryBlock;
    scratch.block_max = scratch.alpha + kQueryBlock;
    return scratch;
  }
};

using BlockFunction = void (*)(const Job& job, int64_t item, const Scratch& scratch);

// ---- The SIMD interface the kernels are written against ----------------------------------------
// kScoreRows x kScoreVectors: the S micro-kernel's register tile (keys x query vectors);
// kOutRows x kOutVectors: the P V micro-kernel's (queries x d_v vectors).

struct ScalarOps {
  using V = float;
  static constexpr int kWidth = 1;
  static constexpr int kScoreRows = 4, kScoreVectors = 4;
  static constexpr int kOutRows = 4, kOutVectors = 4;
  static V zero() { return 0.0f; }
  static V broadcast(float x) { return x; }
  static V load(const float* p) { return *p; }
  static void store(float* p, V x) { *p = x; }
  static V fmadd(V a, V b, V c) { return a * b + c; }
  static V mul(V a, V b) { return a * b; }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V max(V a, V b) { return a > b ? a : b; }
  static V zero_if_minus_infinity(V x) {
    return x == -std::numeric_limits<float>::infinity() ? 0.0f : x;
  }
  static V exp2(V t) { return std::exp2(t); }
  static void widen_fp16(const uint16_t* source, float* destination, int64_t count) {
    for (int64_t i = 0; i < count; ++i) destination[i] = from_fp16_bits(source[i]);
  }
};

// 2^f for |f| <= 1/2 by a degree-5 polynomial fitted for relative error (max 1.8e-7 in fp32).
constexpr float kExp2C5 = 1.3218672e-3f, kExp2C4 = 9.6716983e-3f, kExp2C3 = 5.5508930e-2f,
                kExp2C2 = 2.4022238e-1f, kExp2C1 = 6.9314688e-1f;
// 1.5 * 2^23 + 127: x + kRoundBias has round(x) + 127 in its low mantissa bits for |x| < 2^22.
constexpr float kRoundBias = 12583039.0f;

#if defined(ATTNBENCH_FLASH_CPU_X86)

// Target options add to the build's own (-march): with ATTNBENCH_NATIVE=OFF the AVX2 copy is
// pure AVX2; in a -march=native build on an AVX-512 machine the compiler may use AVX-512
// encodings in it, which that machine runs. (Subtracting them with no-avx512f is not an option:
// the intrinsics, compiled with the build's target, would no longer inline.)
#define ATTNBENCH_FLASH_CPU_AVX2 "avx2,fma,f16c"
#define ATTNBENCH_FLASH_CPU_AVX512 "avx512f,avx2,fma,f16c"

struct Avx2Ops {
  using V = __m256;
  static constexpr int kWidth = 8;
  // 6 x 2 accumulators + 2 loaded vectors + 1 broadcast = 15 of the 16 ymm registers.
  static constexpr int kScoreRows = 6, kScoreVectors = 2;
  static constexpr int kOutRows = 6, kOutVectors = 2;
#define ATTNBENCH_OP __attribute__((target(ATTNBENCH_FLASH_CPU_AVX2), always_inline)) static inline
  ATTNBENCH_OP V zero() { return _mm256_setzero_ps(); }
  ATTNBENCH_OP V broadcast(float x) { return _mm256_set1_ps(x); }
  ATTNBENCH_OP V load(const float* p) { return _mm256_loadu_ps(p); }
  ATTNBENCH_OP void store(float* p, V x) { _mm256_storeu_ps(p, x); }
  ATTNBENCH_OP V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  // fp16 to fp32 by F16C, 8 at a time.
  ATTNBENCH_OP void widen_fp16(const uint16_t* source, float* destination, int64_t count) {
    int64_t i = 0;
    for (; i + 8 <= count; i += 8)
      _mm256_storeu_ps(
          destination + i,
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(source + i))));
    for (; i < count; ++i) destination[i] = _cvtsh_ss(source[i]);
  }
  ATTNBENCH_OP V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  ATTNBENCH_OP V add(V a, V b) { return _mm256_add_ps(a, b); }
  ATTNBENCH_OP V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  ATTNBENCH_OP V max(V a, V b) { return _mm256_max_ps(a, b); }
  ATTNBENCH_OP V zero_if_minus_infinity(V x) {
    const V minus_infinity = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    return _mm256_andnot_ps(_mm256_cmp_ps(x, minus_infinity, _CMP_EQ_OQ), x);
  }
  // 2^t for t <= 0 (a hair above 0 is fine): t = n + f with n = round(t), 2^f by the
  // polynomial, 2^n put straight into the exponent bits. Adding kRoundBias rounds t to an integer
  // and leaves n + 127 in the low mantissa bits, ready to shift into the exponent field. t is
  // clamped at -127, where that field is 0 and 2^n exactly 0, so exp2(-inf) = 0.
  ATTNBENCH_OP V exp2(V t) {
    t = _mm256_max_ps(t, _mm256_set1_ps(-127.0f));
    const V biased = _mm256_add_ps(t, _mm256_set1_ps(kRoundBias));
    const V n = _mm256_sub_ps(biased, _mm256_set1_ps(kRoundBias));
    const V f = _mm256_sub_ps(t, n);
    V p = _mm256_fmadd_ps(_mm256_set1_ps(kExp2C5), f, _mm256_set1_ps(kExp2C4));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(kExp2C3));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(kExp2C2));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(kExp2C1));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    const __m256i exponent = _mm256_slli_epi32(_mm256_castps_si256(biased), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(exponent));
  }
#undef ATTNBENCH_OP
};

struct Avx512Ops {
  using V = __m512;
  static constexpr int kWidth = 16;
  // 12 x 2 accumulators + 2 loaded vectors + 1 broadcast = 27 of the 32 zmm registers.
  static constexpr int kScoreRows = 12, kScoreVectors = 2;
  static constexpr int kOutRows = 12, kOutVectors = 2;
  // The zero-masked forms with an all-ones mask compile to the plain instructions; GCC 12's
  // unmasked ones start from an uninitialised register and trip -Wmaybe-uninitialized.
  static constexpr __mmask16 kAll = 0xFFFF;
#define ATTNBENCH_OP \
  __attribute__((target(ATTNBENCH_FLASH_CPU_AVX512), always_inline)) static inline
  ATTNBENCH_OP V zero() { return _mm512_setzero_ps(); }
  // fp16 to fp32, 16 at a time.
  ATTNBENCH_OP void widen_fp16(const uint16_t* source, float* destination, int64_t count) {
    int64_t i = 0;
    for (; i + 16 <= count; i += 16) {
      const __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(source + i));
      _mm512_storeu_ps(destination + i, _mm512_maskz_cvtph_ps(kAll, half));
    }
    for (; i < count; ++i) destination[i] = _cvtsh_ss(source[i]);
  }
  ATTNBENCH_OP V broadcast(float x) { return _mm512_set1_ps(x); }
  ATTNBENCH_OP V load(const float* p) { return _mm512_loadu_ps(p); }
  ATTNBENCH_OP void store(float* p, V x) { _mm512_storeu_ps(p, x); }
  ATTNBENCH_OP V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  ATTNBENCH_OP V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  ATTNBENCH_OP V add(V a, V b) { return _mm512_add_ps(a, b); }
  ATTNBENCH_OP V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  ATTNBENCH_OP V max(V a, V b) { return _mm512_maskz_max_ps(kAll, a, b); }
  ATTNBENCH_OP V zero_if_minus_infinity(V x) {
    const V minus_infinity = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, minus_infinity, _CMP_NEQ_UQ), x);
  }
  // As Avx2Ops::exp2.
  ATTNBENCH_OP V exp2(V t) {
    t = max(t, _mm512_set1_ps(-127.0f));
    const V biased = _mm512_add_ps(t, _mm512_set1_ps(kRoundBias));
    const V n = _mm512_sub_ps(biased, _mm512_set1_ps(kRoundBias));
    const V f = _mm512_sub_ps(t, n);
    V p = _mm512_fmadd_ps(_mm512_set1_ps(kExp2C5), f, _mm512_set1_ps(kExp2C4));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kExp2C3));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kExp2C2));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kExp2C1));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    const __m512i exponent = _mm512_maskz_slli_epi32(kAll, _mm512_castps_si512(biased), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(exponent));
  }
#undef ATTNBENCH_OP
};

#endif  // ATTNBENCH_FLASH_CPU_X86

}  // namespace flash_cpu
}  // namespace
}  // namespace attnbench

// ---- One copy of the kernels per ISA -------------------------------------------------------
#define ATTNBENCH_FLASH_CPU_KERNELS
#define ATTNBENCH_FLASH_CPU_OPS ScalarOps
#define ATTNBENCH_FLASH_CPU_NAMESPACE scalar
#include __FILE__
#undef ATTNBENCH_FLASH_CPU_OPS
#undef ATTNBENCH_FLASH_CPU_NAMESPACE

#if defined(ATTNBENCH_FLASH_CPU_X86)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")  // = ATTNBENCH_FLASH_CPU_AVX2; pragmas take no macros
#define ATTNBENCH_FLASH_CPU_OPS Avx2Ops
#define ATTNBENCH_FLASH_CPU_NAMESPACE avx2
#include __FILE__
#undef ATTNBENCH_FLASH_CPU_OPS
#undef ATTNBENCH_FLASH_CPU_NAMESPACE
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma,f16c")  // = ATTNBENCH_FLASH_CPU_AVX512
#define ATTNBENCH_FLASH_CPU_OPS Avx512Ops
#define ATTNBENCH_FLASH_CPU_NAMESPACE avx512
#include __FILE__
#undef ATTNBENCH_FLASH_CPU_OPS
#undef ATTNBENCH_FLASH_CPU_NAMESPACE
#pragma GCC pop_options
#endif

namespace attnbench {
namespace {

class FlashCpuVariant final : public Variant {
 public:
  VariantInfo info() const override {
    VariantInfo info;
    info.name = "flash_cpu";
    info.device = Device::cpu;
    info.summary = std::string("fused flash-style blocks, online softmax, register-blocked ") +
                   flash_cpu::to_string(flash_cpu::best_isa()) +
                   " micro-kernels (ATTNBENCH_FLASH_CPU_ISA overrides); O(d) workspace per thread";
    info.capabilities.causal = true;
    info.capabilities.gqa = true;
    info.capabilities.returns_weights = false;
    info.capabilities.dtypes = all_dtypes();
    info.capabilities.layouts = all_layouts();
    return info;
  }

  std::size_t workspace_bytes(const Shape& s) const override {
    return static_cast<std::size_t>(omp_get_max_threads()) *
           static_cast<std::size_t>(flash_cpu::ScratchLayout(s).per_thread) * sizeof(float);
  }

  void prepare(const Shape& s, Workspace& workspace) override {
    const flash_cpu::Isa isa = flash_cpu::selected_isa();
    switch (isa) {
      case flash_cpu::Isa::scalar: block_ = flash_cpu::scalar::attend_query_block; break;
#if defined(ATTNBENCH_FLASH_CPU_X86)
      case flash_cpu::Isa::avx2: block_ = flash_cpu::avx2::attend_query_block; break;
      case flash_cpu::Isa::avx512: block_ = flash_cpu::avx512::attend_query_block; break;
#else
      default: throw std::runtime_error("flash_cpu: only the scalar kernels are built here");
#endif
    }
    threads_ = omp_get_max_threads();
    scratch_ = workspace.allocate_array<float>(workspace_bytes(s) / sizeof(float));
    // The kernels chosen, and how narrow inputs reach them: widened to fp32 per block.
    code_path_ = flash_cpu::to_string(isa);
    if (s.dtype != DType::fp32) code_path_ += std::string("+widened_") + to_string(s.dtype);
  }

  std::string code_path() const override { return code_path_; }

  void run(const Problem& p) override {
    flash_cpu::Job job;
    job.shape = p.shape;
    job.scale_log2 = p.scale * 1.44269504088896341f;
    job.tensors = p.tensors;
    job.query_blocks = (p.shape.seq_q + flash_cpu::kQueryBlock - 1) / flash_cpu::kQueryBlock;
    job.dv_stride = flash_cpu::round_up(p.shape.d_v, flash_cpu::kMaxWidth);
    const flash_cpu::ScratchLayout layout(p.shape);
    const int64_t items = p.shape.batch * p.shape.heads * job.query_blocks;
    const flash_cpu::BlockFunction block = block_;
    float* const scratch_base = scratch_;
#pragma omp parallel num_threads(threads_)
    {
      const flash_cpu::Scratch scratch =
          layout.carve(scratch_base + omp_get_thread_num() * layout.per_thread);
      // Causal blocks differ in cost; dynamic scheduling (and the heaviest blocks first, see
      // attend_query_block) keeps both cores busy to the end.
#pragma omp for schedule(dynamic, 1)
      for (int64_t item = 0; item < items; ++item) block(job, item, scratch);
    }
  }

 private:
  std::string code_path_;
  flash_cpu::BlockFunction block_ = nullptr;
  int threads_ = 1;
  float* scratch_ = nullptr;
};

}  // namespace

ATTNBENCH_REGISTER_VARIANT(FlashCpuVariant);

}  // namespace attnbench

#else  // ATTNBENCH_FLASH_CPU_KERNELS: the kernels, compiled once per ISA (see the top)

namespace attnbench {
namespace {
namespace flash_cpu {
namespace ATTNBENCH_FLASH_CPU_NAMESPACE {

using Ops = ATTNBENCH_FLASH_CPU_OPS;
using V = Ops::V;
constexpr int kWidth = Ops::kWidth;
constexpr int64_t kStrip = Ops::kScoreVectors * kWidth;  // queries per S micro-kernel column
static_assert(kQueryBlock % kStrip == 0, "query block must be whole strips");
static_assert(kKeyBlock % Ops::kScoreRows == 0, "key block must be whole row groups");

// scores[r][i] = sum_c k[r][c] * q_t[c][i] for kRows keys and one strip of queries: the keys are
// broadcast, kVectors query vectors loaded, kRows x kVectors accumulators stay in registers.
// The strip's running block max is updated from the registers, saving the softmax a pass.
template <int kRows>
void score_tile(const float* k, int64_t d_k, const float* q_t, float* scores, float* block_max) {
  constexpr int kVectors = Ops::kScoreVectors;
  V acc[kRows][kVectors];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x) acc[r][x] = Ops::zero();
  for (int64_t c = 0; c < d_k; ++c) {
    V q[kVectors];
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x) q[x] = Ops::load(q_t + c * kQueryBlock + x * kWidth);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const V key = Ops::broadcast(k[r * d_k + c]);
#pragma GCC unroll 4
      for (int x = 0; x < kVectors; ++x) acc[r][x] = Ops::fmadd(key, q[x], acc[r][x]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x) Ops::store(scores + r * kQueryBlock + x * kWidth, acc[r][x]);
#pragma GCC unroll 4
  for (int x = 0; x < kVectors; ++x) {
    V tile_max = Ops::load(block_max + x * kWidth);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) tile_max = Ops::max(tile_max, acc[r][x]);
    Ops::store(block_max + x * kWidth, tile_max);
  }
}

// Dispatches a run-time row count (1 .. kRows) to the matching compiled tile.
template <int kRows>
void score_rows(int rows, const float* k, int64_t d_k, const float* q_t, float* scores,
                float* block_max) {
  if constexpr (kRows > 0) {
    if (rows == kRows) return score_tile<kRows>(k, d_k, q_t, scores, block_max);
    score_rows<kRows - 1>(rows, k, d_k, q_t, scores, block_max);
  }
}

// out[i][c] = alpha[i] * out[i][c] + sum_j p[j][i] * v[j][c] for kRows queries and kVectors
// vectors of d_v: the probabilities are broadcast, V rows loaded, the O tile stays in registers.
template <int kRows, int kVectors>
void output_tile(const float* p, int64_t keys, const float* v, int64_t v_stride, const float* alpha,
                 float* out, int64_t out_stride) {
  V acc[kRows][kVectors];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) {
    const V a = Ops::broadcast(alpha[r]);
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x)
      acc[r][x] = Ops::mul(a, Ops::load(out + r * out_stride + x * kWidth));
  }
  for (int64_t j = 0; j < keys; ++j) {
    V value[kVectors];
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x) value[x] = Ops::load(v + j * v_stride + x * kWidth);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const V weight = Ops::broadcast(p[j * kQueryBlock + r]);
#pragma GCC unroll 4
      for (int x = 0; x < kVectors; ++x) acc[r][x] = Ops::fmadd(weight, value[x], acc[r][x]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x) Ops::store(out + r * out_stride + x * kWidth, acc[r][x]);
}

template <int kRows, int kVectors>
void output_vectors(int vectors, const float* p, int64_t keys, const float* v, int64_t v_stride,
                    const float* alpha, float* out, int64_t out_stride) {
  if constexpr (kVectors > 0) {
    if (vectors == kVectors)
      return output_tile<kRows, kVectors>(p, keys, v, v_stride, alpha, out, out_stride);
    output_vectors<kRows, kVectors - 1>(vectors, p, keys, v, v_stride, alpha, out, out_stride);
  }
}

template <int kRows>
void output_rows(int rows, int vectors, const float* p, int64_t keys, const float* v,
                 int64_t v_stride, const float* alpha, float* out, int64_t out_stride) {
  if constexpr (kRows > 0) {
    if (rows == kRows)
      return output_vectors<kRows, Ops::kOutVectors>(vectors, p, keys, v, v_stride, alpha, out,
                                                     out_stride);
    output_rows<kRows - 1>(rows, vectors, p, keys, v, v_stride, alpha, out, out_stride);
  }
}

// Online softmax over one key block for `columns` queries (a whole number of vectors): the new
// running max, alpha = exp2(old max - new max) for the accumulator, scores -> exp2(score - max)
// in place, and the running sums. The block max comes from the score kernel, or is recomputed
// here when masking changed the scores after it (`recompute_max`).
void softmax_block(int64_t keys, int64_t columns, bool recompute_max, const Scratch& scratch) {
  for (int64_t i = 0; i < columns; i += kWidth) {
    V block_max = Ops::load(scratch.block_max + i);
    if (recompute_max) {
      const float* column = scratch.scores + i;
      block_max = Ops::load(column);
      for (int64_t j = 1; j < keys; ++j)
        block_max = Ops::max(block_max, Ops::load(column + j * kQueryBlock));
    }
    const V old_max = Ops::load(scratch.row_max + i);
    const V new_max = Ops::max(old_max, block_max);
    // A query that has seen only masked keys keeps max -inf; subtracting 0 instead keeps its
    // exp2(-inf) = 0 from turning into exp2(-inf + inf) = NaN.
    const V shift = Ops::zero_if_minus_infinity(new_max);
    const V alpha = Ops::exp2(Ops::sub(old_max, shift));
    V sum = Ops::zero();
    for (int64_t j = 0; j < keys; ++j) {
      float* score = scratch.scores + j * kQueryBlock + i;
      const V probability = Ops::exp2(Ops::sub(Ops::load(score), shift));
      Ops::store(score, probability);
      sum = Ops::add(sum, probability);
    }
    Ops::store(scratch.row_max + i, new_max);
    Ops::store(scratch.row_sum + i, Ops::fmadd(Ops::load(scratch.row_sum + i), alpha, sum));
    Ops::store(scratch.alpha + i, alpha);
  }
}

// count elements of a row in `dtype` at `source`, widened to fp32 at `destination`.
void widen_row(DType dtype, const void* source, float* destination, int64_t count) {
  switch (dtype) {
    case DType::fp32: std::copy_n(static_cast<const float*>(source), count, destination); break;
    case DType::bf16: {
      const auto* bits = static_cast<const uint16_t*>(source);
      for (int64_t i = 0; i < count; ++i) destination[i] = from_bf16_bits(bits[i]);
      break;
    }
    case DType::fp16:
      Ops::widen_fp16(static_cast<const uint16_t*>(source), destination, count);
      break;
  }
}

// One block of up to kQueryBlock query rows of one (batch, head), over all its visible keys.
void attend_query_block(const Job& job, int64_t item, const Scratch& scratch) {
  const Shape& s = job.shape;
  const float minus_infinity = -std::numeric_limits<float>::infinity();
  const int64_t head_index = item / job.query_blocks;  // b * heads + h
  // Last query block first: under a causal mask it is the most expensive.
  const int64_t query_block = job.query_blocks - 1 - item % job.query_blocks;
  const int64_t first_query = query_block * kQueryBlock;
  const int64_t rows = std::min(kQueryBlock, s.seq_q - first_query);
  const int64_t columns = round_up(rows, kStrip);
  const int64_t batch = head_index / s.heads;
  const int64_t head = head_index % s.heads;
  const int64_t kv_head = head / s.group_size();
  const TensorView& q_view = job.tensors.q;
  const TensorView& k_view = job.tensors.k;
  const TensorView& v_view = job.tensors.v;
  const TensorView& o_view = job.tensors.o;
  // fp32 with K rows d_k apart is read in place; any other dtype or layout is packed per block.
  const bool direct_k = s.dtype == DType::fp32 && k_view.row_stride == s.d_k;
  const bool direct_v = s.dtype == DType::fp32 && s.d_v % kWidth == 0;

  // Qᵀ, pre-scaled into base 2; padding columns are zero (their scores are 0, never written).
  for (int64_t i = 0; i < rows; ++i) {
    widen_row(s.dtype, q_view.address(batch, head, first_query + i), scratch.k_packed, s.d_k);
    for (int64_t c = 0; c < s.d_k; ++c)
      scratch.q_t[c * kQueryBlock + i] = scratch.k_packed[c] * job.scale_log2;
  }
  for (int64_t c = 0; c < s.d_k; ++c)
    std::fill(scratch.q_t + c * kQueryBlock + rows, scratch.q_t + c * kQueryBlock + columns, 0.0f);
  const int64_t dv_vectors = (s.d_v + kWidth - 1) / kWidth;
  for (int64_t i = 0; i < rows; ++i)
    std::fill(scratch.out + i * job.dv_stride,
              scratch.out + i * job.dv_stride + dv_vectors * kWidth, 0.0f);
  std::fill(scratch.row_max, scratch.row_max + columns, minus_infinity);
  std::fill(scratch.row_sum, scratch.row_sum + columns, 0.0f);

  // Query row i sees keys 0 .. i + offset (causal, aligned to the end).
  const int64_t offset = s.seq_kv - s.seq_q;
  const int64_t keys_seen =
      s.causal ? std::clamp<int64_t>(first_query + rows + offset, 0, s.seq_kv) : s.seq_kv;
  // V rows are read as whole vectors; when d_v is not a multiple of the width, or V is not fp32,
  // they are copied (widened) into zero-padded rows first.

  for (int64_t first_key = 0; first_key < keys_seen; first_key += kKeyBlock) {
    const int64_t keys = std::min(kKeyBlock, keys_seen - first_key);

    const float* k_block = scratch.k_packed;
    if (direct_k) {
      k_block = k_view.row<const float>(batch, kv_head, first_key);
    } else {
      for (int64_t j = 0; j < keys; ++j)
        widen_row(s.dtype, k_view.address(batch, kv_head, first_key + j),
                  scratch.k_packed + j * s.d_k, s.d_k);
    }
    // S = Q Kᵀ for the tile, key-major: scores[j][i].
    std::fill(scratch.block_max, scratch.block_max + columns, minus_infinity);
    for (int64_t j = 0; j < keys; j += Ops::kScoreRows) {
      const int group = static_cast<int>(std::min<int64_t>(Ops::kScoreRows, keys - j));
      for (int64_t i = 0; i < columns; i += kStrip)
        score_rows<Ops::kScoreRows>(group, k_block + j * s.d_k, s.d_k, scratch.q_t + i,
                                    scratch.scores + j * kQueryBlock + i, scratch.block_max + i);
    }
    // Tiles that cross the diagonal: key j is hidden from queries i < j - offset.
    const bool masked = s.causal && first_key + keys - 1 > first_query + offset;
    if (masked) {
      for (int64_t j = 0; j < keys; ++j) {
        const int64_t hidden = std::min(columns, first_key + j - offset - first_query);
        if (hidden > 0)
          std::fill(scratch.scores + j * kQueryBlock, scratch.scores + j * kQueryBlock + hidden,
                    minus_infinity);
      }
    }
    softmax_block(keys, columns, masked, scratch);

    const float* v_block = scratch.v_packed;
    int64_t v_stride = job.dv_stride;
    if (direct_v) {
      v_block = v_view.row<const float>(batch, kv_head, first_key);
      v_stride = v_view.row_stride;
    } else {
      for (int64_t j = 0; j < keys; ++j) {
        float* row = scratch.v_packed + j * job.dv_stride;
        widen_row(s.dtype, v_view.address(batch, kv_head, first_key + j), row, s.d_v);
        std::fill(row + s.d_v, row + dv_vectors * kWidth, 0.0f);
      }
    }
    // O = alpha O + P V.
    for (int64_t i = 0; i < rows; i += Ops::kOutRows) {
      const int group = static_cast<int>(std::min<int64_t>(Ops::kOutRows, rows - i));
      for (int64_t x = 0; x < dv_vectors; x += Ops::kOutVectors) {
        const int vectors = static_cast<int>(std::min<int64_t>(Ops::kOutVectors, dv_vectors - x));
        output_rows<Ops::kOutRows>(group, vectors, scratch.scores + i, keys, v_block + x * kWidth,
                                   v_stride, scratch.alpha + i,
                                   scratch.out + i * job.dv_stride + x * kWidth, job.dv_stride);
      }
    }
  }

  // O = accumulator / row sum, rounded to the dtype as it is stored.
  for (int64_t i = 0; i < rows; ++i) {
    const float inverse = 1.0f / scratch.row_sum[i];
    float* out = scratch.out + i * job.dv_stride;
    for (int64_t c = 0; c < s.d_v; ++c) out[c] *= inverse;
    narrow_from_fp32(s.dtype, out, o_view.address(batch, head, first_query + i), s.d_v);
  }
}

}  // namespace ATTNBENCH_FLASH_CPU_NAMESPACE
}  // namespace flash_cpu
}  // namespace
}  // namespace attnbench

#endif  // ATTNBENCH_FLASH_CPU_KERNELS
