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
// Masks and modifiers (mask.h: every mask kind, ALiBi, soft-capping) cost what they leave
// visible, as FlexAttention's block masks do: a query block visits only the key blocks inside the
// hull of its rows' visible keys, skips those no row sees, and masks element by element only the
// blocks the mask cuts through; within those, 12-key x 32-query sub-tiles no query sees are not
// computed, and the softmax and P V kernels of a group of rows cover only the keys the group
// sees. Fully visible blocks run exactly the unmasked code. The modifiers are one extra pass over
// a block's scores (soft-capping through a vectorised tanh).
// Where the time goes (fp32, n 4096, d 64, one thread, by leaving each part out): the S kernel
// about 43%, the P V kernel 46%, the softmax 12%; the two kernels run at 76-81% of the FMA peak
// inside the loop (llvm-mca puts the S inner loop at 13 cycles against its 12-cycle FMA bound),
// the rest going to fetching K and V (2-7%). So about 75% of peak overall, and the softmax alone
// keeps it under 90%.
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
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "harness/core/element.h"
#include "harness/core/mask.h"
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
constexpr int64_t kMaxWidth = 16;   // floats in the widest vector; row strides are padded to it
constexpr int64_t kCacheLine = 16;  // floats in a 64-byte cache line

// avx512_bf16 runs the AVX-512 kernels, and for bf16 tensors the vdpbf16ps ones (see the
// bf16 dot-product kernels below).
enum class Isa { scalar, avx2, avx512, avx512_bf16 };

const char* to_string(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::avx512_bf16: return "avx512_bf16";
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
    case Isa::avx512_bf16:
      return isa_supported(Isa::avx512) && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512bf16");
  }
  return false;
#else
  return isa == Isa::scalar;
#endif
}

#if defined(ATTNBENCH_FLASH_CPU_X86)
// Throughput probes for the choice below: kProbeChains independent accumulator chains of one
// instruction, with operands the compiler cannot see through (a volatile), as the harness's peak
// loops do. Plain functions, no lambdas: a lambda does not inherit its caller's target.
constexpr int kProbeChains = 12;
constexpr int64_t kProbeSteps = 100'000;

__attribute__((target("avx512f,avx512bf16"))) float probe_bf16_dot() {
  __m512 acc[kProbeChains];
  volatile int bits = 0x33803F80;  // the bf16 pair (1, 6e-8)
  const __m512bh a = reinterpret_cast<__m512bh>(_mm512_set1_epi32(bits));
  const __m512bh b = reinterpret_cast<__m512bh>(_mm512_set1_epi32(0x3F803F80));
  for (int c = 0; c < kProbeChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  for (int64_t step = 0; step < kProbeSteps; ++step)
    for (int c = 0; c < kProbeChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  // One lane of each chain keeps the work alive (_mm512_reduce_add_ps trips GCC 12's
  // -Wuninitialized inside its own header).
  alignas(64) float lanes[16];
  float sum = 0;
  for (int c = 0; c < kProbeChains; ++c) {
    _mm512_store_ps(lanes, acc[c]);
    sum += lanes[0];
  }
  return sum;
}

__attribute__((target("avx512f"))) float probe_fma() {
  __m512 acc[kProbeChains];
  volatile float multiplier = 0.999999f;
  const __m512 m = _mm512_set1_ps(multiplier);
  const __m512 addend = _mm512_set1_ps(1e-7f);
  for (int c = 0; c < kProbeChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  for (int64_t step = 0; step < kProbeSteps; ++step)
    for (int c = 0; c < kProbeChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], m, addend);
  // One lane of each chain keeps the work alive (_mm512_reduce_add_ps trips GCC 12's
  // -Wuninitialized inside its own header).
  alignas(64) float lanes[16];
  float sum = 0;
  for (int c = 0; c < kProbeChains; ++c) {
    _mm512_store_ps(lanes, acc[c]);
    sum += lanes[0];
  }
  return sum;
}

// FLOPs per second of `probe` on this thread; each instruction does flops_per_instruction.
double probe_rate(float (*probe)(), double flops_per_instruction) {
  const auto start = std::chrono::steady_clock::now();
  volatile float sink = probe();
  static_cast<void>(sink);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return flops_per_instruction * kProbeChains * kProbeSteps / seconds;
}

// Whether bf16 products run faster as vdpbf16ps than widened to fp32 on the FMA units. It
// depends on the core: AMD Zen 4 retires vdpbf16ps at twice the FMA's FLOP rate, while on the
// Intel Xeon hosts measured here it runs at half of it. Measured once per process (a few ms,
// best of 7 interleaved trials of each, so a busy neighbour only lowers both).
bool bf16_dot_outpaces_fma() {
  static const bool faster = [] {
    double dot = 0, fma = 0;
    for (int trial = 0; trial < 7; ++trial) {
      dot = std::max(dot, probe_rate(probe_bf16_dot, 64));  // 16 lanes x 2 products x 2 FLOPs
      fma = std::max(fma, probe_rate(probe_fma, 32));
    }
    return dot > fma;
  }();
  return faster;
}
#endif

// The fastest kernels this CPU has. avx512_bf16 differs from avx512 only in bf16 cases, and is
// chosen only where its dot products outpace widening to fp32.
Isa best_isa() {
  if (isa_supported(Isa::avx512_bf16) && bf16_dot_outpaces_fma()) return Isa::avx512_bf16;
  if (isa_supported(Isa::avx512)) return Isa::avx512;
  if (isa_supported(Isa::avx2)) return Isa::avx2;
  return Isa::scalar;
}

// The ISA prepare() selects: ATTNBENCH_FLASH_CPU_ISA when set, else the best the CPU has.
Isa selected_isa() {
  const char* requested = std::getenv("ATTNBENCH_FLASH_CPU_ISA");
  if (requested == nullptr || *requested == '\0') return best_isa();
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_bf16}) {
    if (std::string(requested) != to_string(isa)) continue;
    if (!isa_supported(isa))
      throw std::runtime_error(std::string("flash_cpu: ATTNBENCH_FLASH_CPU_ISA=") + requested +
                               " but this CPU does not support it");
    return isa;
  }
  throw std::runtime_error(std::string("flash_cpu: ATTNBENCH_FLASH_CPU_ISA=") + requested +
                           " is not one of scalar, avx2, avx512, avx512_bf16");
}

// Whether a case runs its two products as bf16 dot products (vdpbf16ps): bf16 tensors, the
// instruction, and d_k even (the products take d_k in pairs).
bool uses_bf16_dot(Isa isa, const Shape& s) {
  return isa == Isa::avx512_bf16 && s.dtype == DType::bf16 && s.d_k % 2 == 0;
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
  int64_t dv_stride;         // row stride of the O accumulator and of packed V
  const MaskGeometry* mask;  // which keys each query row sees
  float softcap_log2;        // shape.softcap * log2(e), or 0 for none: the cap in base 2
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

constexpr float kLog2e = 1.44269504088896341f;

// The keys of one key block each query column sees: [lo[i], hi[i]), counted from the block's
// first key (0 .. keys for every column of a fully visible block). Both ends never decrease with
// i (mask.h), so columns i .. i + n - 1 together see keys lo[i] .. hi[i + n - 1]: the sub-tile
// skipping, the softmax and the P V kernel all take their bounds that way. Padding columns past
// the block's last row repeat its range.
struct TileKeys {
  int32_t lo[kQueryBlock];
  int32_t hi[kQueryBlock];

  // Whether any of columns [first_column, end_column) sees any of keys [first_key, end_key).
  bool sees_any(int64_t first_column, int64_t end_column, int64_t first_key,
                int64_t end_key) const {
    return lo[first_column] < end_key && hi[end_column - 1] > first_key;
  }
};

// 0, 1, ..., kQueryBlock - 1 as floats: a vector of query offsets for the ALiBi distances.
struct ColumnIndex {
  float value[kQueryBlock];
  constexpr ColumnIndex() : value() {
    for (int64_t i = 0; i < kQueryBlock; ++i) value[i] = static_cast<float>(i);
  }
};
alignas(64) constexpr ColumnIndex kColumnIndex;

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
  static V min(V a, V b) { return a < b ? a : b; }
  static V div(V a, V b) { return a / b; }
  // Lane by lane: when_less where x < bound, otherwise elsewhere.
  static V select_less(V x, V bound, V when_less, V otherwise) {
    return x < bound ? when_less : otherwise;
  }
  static V abs(V x) { return std::fabs(x); }
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
  ATTNBENCH_OP V min(V a, V b) { return _mm256_min_ps(a, b); }
  ATTNBENCH_OP V div(V a, V b) { return _mm256_div_ps(a, b); }
  ATTNBENCH_OP V select_less(V x, V bound, V when_less, V otherwise) {
    return _mm256_blendv_ps(otherwise, when_less, _mm256_cmp_ps(x, bound, _CMP_LT_OQ));
  }
  ATTNBENCH_OP V abs(V x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }
  ATTNBENCH_OP V zero_if_minus_infinity(V x) {
    const V minus_infinity = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    return _mm256_andnot_ps(_mm256_cmp_ps(x, minus_infinity, _CMP_EQ_OQ), x);
  }
  // 2^t for -127 <= t < 128 (softmax calls it for t <= 0, tanh for t up to 26): t = n + f with n =
  // round(t), 2^f by the polynomial, 2^n put straight into the exponent bits. Adding kRoundBias
  // rounds t to an integer and leaves n + 127 in the low mantissa bits, ready to shift into the
  // exponent field. t is clamped at -127, where that field is 0 and 2^n exactly 0, so exp2(-inf) =
  // 0.
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
  ATTNBENCH_OP V min(V a, V b) { return _mm512_maskz_min_ps(kAll, a, b); }
  ATTNBENCH_OP V div(V a, V b) { return _mm512_maskz_div_ps(kAll, a, b); }
  ATTNBENCH_OP V select_less(V x, V bound, V when_less, V otherwise) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, bound, _CMP_LT_OQ), otherwise, when_less);
  }
  ATTNBENCH_OP V abs(V x) {
    return _mm512_castsi512_ps(
        _mm512_maskz_and_epi32(kAll, _mm512_castps_si512(x), _mm512_set1_epi32(0x7FFFFFFF)));
  }
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
// The scalar kernels stay scalar: they are the reference path and the fallback. With
// -march=native GCC 12 otherwise vectorises output_tile's key loop across four V rows and, on the
// last key block, reads up to three rows past the block (past the end of V when the block is the
// last), which faulted on a page boundary in tests.
#pragma GCC push_options
#pragma GCC optimize("no-tree-vectorize")
#define ATTNBENCH_FLASH_CPU_OPS ScalarOps
#define ATTNBENCH_FLASH_CPU_NAMESPACE scalar
#include __FILE__
#undef ATTNBENCH_FLASH_CPU_OPS
#undef ATTNBENCH_FLASH_CPU_NAMESPACE
#pragma GCC pop_options

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

// The AVX-512 kernels again, with the bf16 dot-product path compiled in.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512bf16,avx2,fma,f16c")
#define ATTNBENCH_FLASH_CPU_OPS Avx512Ops
#define ATTNBENCH_FLASH_CPU_NAMESPACE avx512_bf16
#define ATTNBENCH_FLASH_CPU_BF16_DOT 1
#include __FILE__
#undef ATTNBENCH_FLASH_CPU_BF16_DOT
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
    info.capabilities.masks = all_mask_kinds();
    info.capabilities.alibi = true;
    info.capabilities.softcap = true;
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
      case flash_cpu::Isa::avx512_bf16: block_ = flash_cpu::avx512_bf16::attend_query_block; break;
#else
      default: throw std::runtime_error("flash_cpu: only the scalar kernels are built here");
#endif
    }
    threads_ = omp_get_max_threads();
    mask_.emplace(s.mask_geometry());
    scratch_ = workspace.allocate_array<float>(workspace_bytes(s) / sizeof(float));
    // The kernels chosen, and how narrow inputs reach them: widened to fp32 per block.
    code_path_ = flash_cpu::to_string(isa);
    if (flash_cpu::uses_bf16_dot(isa, s)) {
      code_path_ += "+vdpbf16ps";
    } else if (s.dtype != DType::fp32) {
      code_path_ += std::string("+widened_") + to_string(s.dtype);
    }
  }

  std::string code_path() const override { return code_path_; }

  void run(const Problem& p) override {
    flash_cpu::Job job;
    job.shape = p.shape;
    job.scale_log2 = p.scale * flash_cpu::kLog2e;
    job.mask = &*mask_;
    job.softcap_log2 = static_cast<float>(p.shape.softcap) * flash_cpu::kLog2e;
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
  std::optional<MaskGeometry> mask_;  // built in prepare(), outside the timed run
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
#define ATTNBENCH_FLASH_CPU_INLINE static inline __attribute__((always_inline))
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
#pragma GCC unroll 2  // the counter, compare and branch then share 2 x 24 FMAs, not 24
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
// The accumulators start at zero and alpha O is added once at the end: started from alpha O,
// every FMA chain would wait for the O tile's loads (from L2 at d = 128, where O is 48 KiB)
// before its first step; at the end those loads were issued long before they are needed.
// Each key step also prefetches one cache line from `prefetch` on (see attend_query_block).
template <int kRows, int kVectors>
void output_tile(const float* p, int64_t keys, const float* v, int64_t v_stride, const float* alpha,
                 float* out, int64_t out_stride, const float* prefetch) {
  V acc[kRows][kVectors];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x) acc[r][x] = Ops::zero();
#pragma GCC unroll 2  // as in score_tile
  for (int64_t j = 0; j < keys; ++j) {
    __builtin_prefetch(prefetch + j * kCacheLine);
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
  for (int r = 0; r < kRows; ++r) {
    const V a = Ops::broadcast(alpha[r]);
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x) {
      float* o = out + r * out_stride + x * kWidth;
      Ops::store(o, Ops::fmadd(a, Ops::load(o), acc[r][x]));
    }
  }
}

template <int kRows, int kVectors>
void output_vectors(int vectors, const float* p, int64_t keys, const float* v, int64_t v_stride,
                    const float* alpha, float* out, int64_t out_stride, const float* prefetch) {
  if constexpr (kVectors > 0) {
    if (vectors == kVectors)
      return output_tile<kRows, kVectors>(p, keys, v, v_stride, alpha, out, out_stride, prefetch);
    output_vectors<kRows, kVectors - 1>(vectors, p, keys, v, v_stride, alpha, out, out_stride,
                                        prefetch);
  }
}

template <int kRows>
void output_rows(int rows, int vectors, const float* p, int64_t keys, const float* v,
                 int64_t v_stride, const float* alpha, float* out, int64_t out_stride,
                 const float* prefetch) {
  if constexpr (kRows > 0) {
    if (rows == kRows)
      return output_vectors<kRows, Ops::kOutVectors>(vectors, p, keys, v, v_stride, alpha, out,
                                                     out_stride, prefetch);
    output_rows<kRows - 1>(rows, vectors, p, keys, v, v_stride, alpha, out, out_stride, prefetch);
  }
}

#if defined(ATTNBENCH_FLASH_CPU_BF16_DOT)
// ---- bf16 dot products (vdpbf16ps) ------------------------------------------------------------
// vdpbf16ps adds, in each fp32 lane, the two products of a pair of bf16 values: the reduction
// dimension is taken two at a time inside a lane. So both products are written over pairs:
// - S = Q Kᵀ reduces over d_k: a lane is a query, holding the pair (q[i][2c], q[i][2c + 1]);
//   a K row's pair (k[j][2c], k[j][2c + 1]) is already adjacent in memory and is broadcast
//   as one 32-bit word. Qᵀ is packed once per query block as q_pairs[c][i].
// - O = P V reduces over the keys: a lane is a column of V, holding (v[2j][c], v[2j + 1][c]),
//   packed once per key block as v_pairs[j][c]; P is rounded to bf16 into p_pairs[j][i] =
//   (p[2j][i], p[2j + 1][i]) and broadcast per query. Rounding P to bf16 before P V is what
//   FlashAttention does on the GPU; the row sums stay those of the fp32 P.
// Accumulation is fp32 throughout; an odd key count is padded with a zero key.

using Bf16Pairs = uint32_t;  // two bf16 values; the lower index in the low half

// The 16-bit elements of the two halves of `both` interleaved: lane k of the result holds
// (both[k], both[16 + k]).
ATTNBENCH_FLASH_CPU_INLINE __m512i interleave_halves(__m512i both) {
  const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24,
                                         8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(order, both);
}

// scores[r][i] = scale_log2 * sum_c k[r][c] q[i][c] for kRows keys and one strip of queries.
template <int kRows>
void score_tile_bf16(const Bf16Pairs* k, int64_t k_stride, int64_t pairs, const Bf16Pairs* q,
                     float scale_log2, float* scores, float* block_max) {
  constexpr int kVectors = Ops::kScoreVectors;
  V acc[kRows][kVectors];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x) acc[r][x] = Ops::zero();
  for (int64_t c = 0; c < pairs; ++c) {
    __m512bh query[kVectors];
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x)
      query[x] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(q + c * kQueryBlock + x * kWidth));
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const __m512bh key =
          reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(k[r * k_stride + c])));
#pragma GCC unroll 4
      for (int x = 0; x < kVectors; ++x) acc[r][x] = _mm512_dpbf16_ps(acc[r][x], key, query[x]);
    }
  }
  const V scale = Ops::broadcast(scale_log2);
#pragma GCC unroll 4
  for (int x = 0; x < kVectors; ++x) {
    V tile_max = Ops::load(block_max + x * kWidth);
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      acc[r][x] = Ops::mul(acc[r][x], scale);
      Ops::store(scores + r * kQueryBlock + x * kWidth, acc[r][x]);
      tile_max = Ops::max(tile_max, acc[r][x]);
    }
    Ops::store(block_max + x * kWidth, tile_max);
  }
}

template <int kRows>
void score_rows_bf16(int rows, const Bf16Pairs* k, int64_t k_stride, int64_t pairs,
                     const Bf16Pairs* q, float scale_log2, float* scores, float* block_max) {
  if constexpr (kRows > 0) {
    if (rows == kRows)
      return score_tile_bf16<kRows>(k, k_stride, pairs, q, scale_log2, scores, block_max);
    score_rows_bf16<kRows - 1>(rows, k, k_stride, pairs, q, scale_log2, scores, block_max);
  }
}

// out[i][c] = alpha[i] out[i][c] + sum_j p[j][i] v[j][c] over key pairs, for kRows queries and
// kVectors vectors of columns.
template <int kRows, int kVectors>
void output_tile_bf16(const Bf16Pairs* p, int64_t key_pairs, const Bf16Pairs* v, int64_t v_stride,
                      const float* alpha, float* out, int64_t out_stride) {
  V acc[kRows][kVectors];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x) acc[r][x] = Ops::zero();
  for (int64_t j = 0; j < key_pairs; ++j) {
    __m512bh value[kVectors];
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x)
      value[x] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(v + j * v_stride + x * kWidth));
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const __m512bh weight =
          reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(p[j * kQueryBlock + r])));
#pragma GCC unroll 4
      for (int x = 0; x < kVectors; ++x) acc[r][x] = _mm512_dpbf16_ps(acc[r][x], weight, value[x]);
    }
  }
  // As in output_tile: alpha O is added last, off the accumulators' critical path.
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) {
    const V a = Ops::broadcast(alpha[r]);
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x) {
      float* o = out + r * out_stride + x * kWidth;
      Ops::store(o, Ops::fmadd(a, Ops::load(o), acc[r][x]));
    }
  }
}

template <int kRows, int kVectors>
void output_vectors_bf16(int vectors, const Bf16Pairs* p, int64_t key_pairs, const Bf16Pairs* v,
                         int64_t v_stride, const float* alpha, float* out, int64_t out_stride) {
  if constexpr (kVectors > 0) {
    if (vectors == kVectors)
      return output_tile_bf16<kRows, kVectors>(p, key_pairs, v, v_stride, alpha, out, out_stride);
    output_vectors_bf16<kRows, kVectors - 1>(vectors, p, key_pairs, v, v_stride, alpha, out,
                                             out_stride);
  }
}

template <int kRows>
void output_rows_bf16(int rows, int vectors, const Bf16Pairs* p, int64_t key_pairs,
                      const Bf16Pairs* v, int64_t v_stride, const float* alpha, float* out,
                      int64_t out_stride) {
  if constexpr (kRows > 0) {
    if (rows == kRows)
      return output_vectors_bf16<kRows, Ops::kOutVectors>(vectors, p, key_pairs, v, v_stride, alpha,
                                                          out, out_stride);
    output_rows_bf16<kRows - 1>(rows, vectors, p, key_pairs, v, v_stride, alpha, out, out_stride);
  }
}

// q_pairs[c][i] = (q[i][2c], q[i][2c + 1]) for the block's rows; padding columns are zero.
void pack_query_pairs(const TensorView& q_view, int64_t batch, int64_t head, int64_t first_query,
                      int64_t rows, int64_t columns, int64_t pairs, Bf16Pairs* q_pairs) {
  for (int64_t i = 0; i < rows; ++i) {
    const auto* row = static_cast<const char*>(q_view.address(batch, head, first_query + i));
    for (int64_t c = 0; c < pairs; ++c)
      std::memcpy(&q_pairs[c * kQueryBlock + i], row + c * sizeof(Bf16Pairs), sizeof(Bf16Pairs));
  }
  for (int64_t c = 0; c < pairs; ++c)
    std::fill(q_pairs + c * kQueryBlock + rows, q_pairs + c * kQueryBlock + columns, 0u);
}

// v_pairs[j][c] = (v[2j][c], v[2j + 1][c]) for the key block, columns zero-padded to the
// vectors the output kernel reads, a missing last key as zeros.
void pack_value_pairs(const TensorView& v_view, int64_t batch, int64_t kv_head, int64_t first_key,
                      int64_t keys, int64_t d_v, int64_t dv_stride, Bf16Pairs* v_pairs) {
  for (int64_t j = 0; j < keys; j += 2) {
    const auto* even = static_cast<const uint16_t*>(v_view.address(batch, kv_head, first_key + j));
    const auto* odd =
        j + 1 < keys
            ? static_cast<const uint16_t*>(v_view.address(batch, kv_head, first_key + j + 1))
            : nullptr;
    for (int64_t c = 0; c < dv_stride; c += kWidth) {
      const int64_t valid = std::clamp<int64_t>(d_v - c, 0, kWidth);
      const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
      const __m256i a = _mm256_maskz_loadu_epi16(mask, even + c);
      const __m256i b =
          odd != nullptr ? _mm256_maskz_loadu_epi16(mask, odd + c) : _mm256_setzero_si256();
      const __m512i both = _mm512_maskz_inserti64x4(0xFF, _mm512_zextsi256_si512(a), b, 1);
      _mm512_storeu_si512(v_pairs + (j / 2) * dv_stride + c, interleave_halves(both));
    }
  }
}

// The block's probabilities (fp32, key-major) rounded to bf16 pairs of keys, in place: row j of
// the result is written over score row j after rows 2j and 2j + 1 were read (j <= 2j).
void pack_probability_pairs(float* scores, int64_t keys, int64_t columns) {
  auto* pairs = reinterpret_cast<Bf16Pairs*>(scores);
  for (int64_t j = 0; j < keys; j += 2) {
    for (int64_t i = 0; i < columns; i += kWidth) {
      const __m512 even = _mm512_loadu_ps(scores + j * kQueryBlock + i);
      const __m512 odd =
          j + 1 < keys ? _mm512_loadu_ps(scores + (j + 1) * kQueryBlock + i) : _mm512_setzero_ps();
      // Rounded to nearest even: [even[0..15], odd[0..15]], then interleaved into pairs.
      const __m512i both = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(odd, even));
      _mm512_storeu_si512(pairs + (j / 2) * kQueryBlock + i, interleave_halves(both));
    }
  }
}
#endif  // ATTNBENCH_FLASH_CPU_BF16_DOT

// Online softmax over one key block for `columns` queries (a whole number of vectors): the new
// running max, alpha = exp2(old max - new max) for the accumulator, scores -> exp2(score - max)
// in place, and the running sums. The block max comes from the score kernel, or is recomputed
// here when masking or a modifier changed the scores after it (`recompute_max`). Only the keys a
// vector's columns see (`tile`) are exponentiated; the rest become 0.
void softmax_block(int64_t keys, int64_t columns, bool recompute_max, const TileKeys& tile,
                   const Scratch& scratch) {
  for (int64_t i = 0; i < columns; i += kWidth) {
    const int64_t first = tile.lo[i];
    const int64_t last = std::max(first, static_cast<int64_t>(tile.hi[i + kWidth - 1]));
    V block_max = Ops::load(scratch.block_max + i);
    if (recompute_max) {
      const float* column = scratch.scores + i;
      block_max = Ops::broadcast(-std::numeric_limits<float>::infinity());
      for (int64_t j = first; j < last; ++j)
        block_max = Ops::max(block_max, Ops::load(column + j * kQueryBlock));
    }
    const V old_max = Ops::load(scratch.row_max + i);
    const V new_max = Ops::max(old_max, block_max);
    // A query that has seen only masked keys keeps max -inf; subtracting 0 instead keeps its
    // exp2(-inf) = 0 from turning into exp2(-inf + inf) = NaN.
    const V shift = Ops::zero_if_minus_infinity(new_max);
    const V alpha = Ops::exp2(Ops::sub(old_max, shift));
    V sum = Ops::zero();
    for (int64_t j = 0; j < first; ++j)
      Ops::store(scratch.scores + j * kQueryBlock + i, Ops::zero());
    for (int64_t j = first; j < last; ++j) {
      float* score = scratch.scores + j * kQueryBlock + i;
      const V probability = Ops::exp2(Ops::sub(Ops::load(score), shift));
      Ops::store(score, probability);
      sum = Ops::add(sum, probability);
    }
    for (int64_t j = last; j < keys; ++j)
      Ops::store(scratch.scores + j * kQueryBlock + i, Ops::zero());
    Ops::store(scratch.row_max + i, new_max);
    Ops::store(scratch.row_sum + i, Ops::fmadd(Ops::load(scratch.row_sum + i), alpha, sum));
    Ops::store(scratch.alpha + i, alpha);
  }
}

// tanh(x) to about 1e-7 absolute: where |x| < 1.5, an odd rational from Lambert's continued
// fraction (error under 2e-8 there); beyond, 1 - 2 / (1 + e^(2x)), which no longer cancels there.
// x is clamped to +-9, past which tanh rounds to +-1 in fp32 (and e^(2x) stays in exp2's range).
ATTNBENCH_FLASH_CPU_INLINE V tanh_of(V x) {
  x = Ops::min(Ops::max(x, Ops::broadcast(-9.0f)), Ops::broadcast(9.0f));
  const V x2 = Ops::mul(x, x);
  V numerator = Ops::add(x2, Ops::broadcast(378.0f));
  numerator = Ops::fmadd(numerator, x2, Ops::broadcast(17325.0f));
  numerator = Ops::mul(x, Ops::fmadd(numerator, x2, Ops::broadcast(135135.0f)));
  V denominator = Ops::fmadd(Ops::broadcast(28.0f), x2, Ops::broadcast(3150.0f));
  denominator = Ops::fmadd(denominator, x2, Ops::broadcast(62370.0f));
  denominator = Ops::fmadd(denominator, x2, Ops::broadcast(135135.0f));
  const V rational = Ops::div(numerator, denominator);
  const V growth = Ops::exp2(Ops::mul(x, Ops::broadcast(2.0f * kLog2e)));
  const V one = Ops::broadcast(1.0f);
  const V saturating = Ops::sub(one, Ops::div(Ops::broadcast(2.0f), Ops::add(one, growth)));
  return Ops::select_less(Ops::abs(x), Ops::broadcast(1.5f), rational, saturating);
}

// The score modifiers on a key block's base-2 scores, in mask.h's order: soft-capping
// s -> c tanh(s / c) (in base 2 the cap is c log2(e) too), then the ALiBi bias
// -slope |p(i) - j|. `distance` is p(i) - j for column 0 and key 0 of the block.
void modify_scores(float softcap_log2, float alibi_slope_log2, int64_t distance, int64_t keys,
                   int64_t columns, float* scores) {
  const V cap = Ops::broadcast(softcap_log2);
  const V inverse_cap = Ops::broadcast(softcap_log2 > 0 ? 1.0f / softcap_log2 : 0.0f);
  const V slope = Ops::broadcast(alibi_slope_log2);
  for (int64_t j = 0; j < keys; ++j) {
    float* row = scores + j * kQueryBlock;
    const V row_distance = Ops::broadcast(static_cast<float>(distance - j));
    for (int64_t i = 0; i < columns; i += kWidth) {
      V score = Ops::load(row + i);
      if (softcap_log2 > 0) score = Ops::mul(cap, tanh_of(Ops::mul(score, inverse_cap)));
      if (alibi_slope_log2 != 0) {
        const V offset = Ops::add(row_distance, Ops::load(kColumnIndex.value + i));
        score = Ops::sub(score, Ops::mul(slope, Ops::abs(offset)));
      }
      Ops::store(row + i, score);
    }
  }
}

// Scores of keys a column does not see -> -inf, over the whole block (sub-tiles the score kernel
// skipped hold stale values, all of them masked).
void mask_scores(const TileKeys& tile, int64_t keys, int64_t columns, float* scores) {
  const float minus_infinity = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < keys; ++j) {
    float* row = scores + j * kQueryBlock;
    for (int64_t i = 0; i < columns; ++i)
      row[i] = j < tile.lo[i] || j >= tile.hi[i] ? minus_infinity : row[i];
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
#if defined(ATTNBENCH_FLASH_CPU_BF16_DOT)
  // bf16 in pairs (see the bf16 dot-product kernels): K read in place, Q and V packed.
  const bool bf16_dot = s.dtype == DType::bf16 && s.d_k % 2 == 0;
  const int64_t d_k_pairs = s.d_k / 2;
  auto* const q_pairs = reinterpret_cast<Bf16Pairs*>(scratch.q_t);
  if (bf16_dot)
    pack_query_pairs(q_view, batch, head, first_query, rows, columns, d_k_pairs, q_pairs);
#else
  constexpr bool bf16_dot = false;
#endif

  // Qᵀ, pre-scaled into base 2; padding columns are zero (their scores are 0, never written).
  // fp32 rows are read in place, the other dtypes widened first.
  for (int64_t i = 0; i < rows && !bf16_dot; ++i) {
    const float* q_row = scratch.k_packed;
    if (s.dtype == DType::fp32) {
      q_row = q_view.row<const float>(batch, head, first_query + i);
    } else {
      widen_row(s.dtype, q_view.address(batch, head, first_query + i), scratch.k_packed, s.d_k);
    }
    for (int64_t c = 0; c < s.d_k; ++c)
      scratch.q_t[c * kQueryBlock + i] = q_row[c] * job.scale_log2;
  }
  for (int64_t c = 0; c < s.d_k && !bf16_dot; ++c)
    std::fill(scratch.q_t + c * kQueryBlock + rows, scratch.q_t + c * kQueryBlock + columns, 0.0f);
  const int64_t dv_vectors = (s.d_v + kWidth - 1) / kWidth;
  for (int64_t i = 0; i < rows; ++i)
    std::fill(scratch.out + i * job.dv_stride,
              scratch.out + i * job.dv_stride + dv_vectors * kWidth, 0.0f);
  std::fill(scratch.row_max, scratch.row_max + columns, minus_infinity);
  std::fill(scratch.row_sum, scratch.row_sum + columns, 0.0f);

  // The keys each row sees (columns past the last row repeat its range), and the hull of them
  // all: key blocks outside it are never visited, fully masked ones inside it are skipped, and
  // only blocks the mask cuts through (partial) are masked element by element.
  const MaskGeometry& mask = *job.mask;
  int64_t row_first[kQueryBlock];
  int64_t row_last[kQueryBlock];
  for (int64_t i = 0; i < columns; ++i) {
    const KeyRange range = mask.keys(first_query + std::min(i, rows - 1));
    row_first[i] = range.first;
    row_last[i] = range.last;
  }
  const KeyRange hull = mask.keys_of_rows(first_query, first_query + rows);
  const bool modified = job.softcap_log2 > 0 || s.alibi;
  const float alibi_slope_log2 =
      s.alibi ? static_cast<float>(alibi_slope(head, s.heads)) * kLog2e : 0.0f;
  TileKeys tile;
  // V rows are read as whole vectors; when d_v is not a multiple of the width, or V is not fp32,
  // they are copied (widened) into zero-padded rows first.

  for (int64_t first_key = hull.first; first_key < hull.last; first_key += kKeyBlock) {
    const int64_t keys = std::min(kKeyBlock, hull.last - first_key);
    // The block's visibility from the rows' ranges (mask.h's classify, without asking the mask
    // again for every row of every block).
    bool any_visible = false;
    bool all_visible = true;
    for (int64_t i = 0; i < columns; ++i) {
      tile.lo[i] = static_cast<int32_t>(std::clamp<int64_t>(row_first[i] - first_key, 0, keys));
      tile.hi[i] = static_cast<int32_t>(std::clamp<int64_t>(row_last[i] - first_key, 0, keys));
      any_visible |= tile.lo[i] < tile.hi[i];
      all_visible &= tile.lo[i] == 0 && tile.hi[i] == keys;
    }
    if (!any_visible) continue;  // fully masked
    const bool partial = !all_visible;

    // S = Q Kᵀ for the tile, key-major: scores[j][i].
    std::fill(scratch.block_max, scratch.block_max + columns, minus_infinity);
#if defined(ATTNBENCH_FLASH_CPU_BF16_DOT)
    if (bf16_dot) {
      const auto* k_pairs =
          static_cast<const Bf16Pairs*>(k_view.address(batch, kv_head, first_key));
      const int64_t k_stride = k_view.row_stride / 2;  // pairs between rows (row strides are even)
      for (int64_t j = 0; j < keys; j += Ops::kScoreRows) {
        const int group = static_cast<int>(std::min<int64_t>(Ops::kScoreRows, keys - j));
        for (int64_t i = 0; i < columns; i += kStrip)
          if (!partial || tile.sees_any(i, i + kStrip, j, j + group))
            score_rows_bf16<Ops::kScoreRows>(
                group, k_pairs + j * k_stride, k_stride, d_k_pairs, q_pairs + i, job.scale_log2,
                scratch.scores + j * kQueryBlock + i, scratch.block_max + i);
      }
    }
#endif
    if (!bf16_dot) {
      const float* k_block = scratch.k_packed;
      if (direct_k) {
        k_block = k_view.row<const float>(batch, kv_head, first_key);
      } else {
        for (int64_t j = 0; j < keys; ++j)
          widen_row(s.dtype, k_view.address(batch, kv_head, first_key + j),
                    scratch.k_packed + j * s.d_k, s.d_k);
      }
      for (int64_t j = 0; j < keys; j += Ops::kScoreRows) {
        const int group = static_cast<int>(std::min<int64_t>(Ops::kScoreRows, keys - j));
        for (int64_t i = 0; i < columns; i += kStrip)
          if (!partial || tile.sees_any(i, i + kStrip, j, j + group))
            score_rows<Ops::kScoreRows>(group, k_block + j * s.d_k, s.d_k, scratch.q_t + i,
                                        scratch.scores + j * kQueryBlock + i,
                                        scratch.block_max + i);
      }
    }
    // Sub-tiles of 12 keys x 32 queries that no column sees were skipped above (a block the
    // mask cuts through still has whole sub-tiles behind it: a sliding window's band).
    if (modified)
      modify_scores(job.softcap_log2, alibi_slope_log2, mask.position(first_query) - first_key,
                    keys, columns, scratch.scores);
    if (partial) mask_scores(tile, keys, columns, scratch.scores);
    softmax_block(keys, columns, partial || modified, tile, scratch);

#if defined(ATTNBENCH_FLASH_CPU_BF16_DOT)
    if (bf16_dot) {
      pack_probability_pairs(scratch.scores, keys, columns);
      auto* const v_pairs = reinterpret_cast<Bf16Pairs*>(scratch.v_packed);
      pack_value_pairs(v_view, batch, kv_head, first_key, keys, s.d_v, job.dv_stride, v_pairs);
      const auto* p_pairs = reinterpret_cast<const Bf16Pairs*>(scratch.scores);
      for (int64_t i = 0; i < rows; i += Ops::kOutRows) {
        const int group = static_cast<int>(std::min<int64_t>(Ops::kOutRows, rows - i));
        // The key pairs any of the group's rows sees; the rest of the block is P = 0.
        const int64_t first_pair = tile.lo[i] / 2;
        const int64_t key_pairs =
            std::max<int64_t>(0, (tile.hi[i + group - 1] + 1) / 2 - first_pair);
        for (int64_t x = 0; x < dv_vectors; x += Ops::kOutVectors) {
          const int vectors = static_cast<int>(std::min<int64_t>(Ops::kOutVectors, dv_vectors - x));
          output_rows_bf16<Ops::kOutRows>(
              group, vectors, p_pairs + first_pair * kQueryBlock + i, key_pairs,
              v_pairs + first_pair * job.dv_stride + x * kWidth, job.dv_stride, scratch.alpha + i,
              scratch.out + i * job.dv_stride + x * kWidth, job.dv_stride);
        }
      }
      continue;
    }
#endif
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
    // The S kernel reads K as kScoreRows broadcast streams, which the hardware prefetchers pick
    // up late; so while P V runs, each output tile prefetches `keys` lines of the next K block,
    // the tiles in turn covering it. Without a contiguous next block that big, the prefetches
    // fall on k_packed, already in L1.
    const int64_t window = keys * kCacheLine;  // floats one output tile prefetches
    const int64_t ahead = direct_k ? std::min(kKeyBlock, s.seq_kv - first_key - keys) * s.d_k : 0;
    const float* k_ahead = ahead >= window
                               ? k_view.row<const float>(batch, kv_head, first_key + keys)
                               : scratch.k_packed;
    int64_t prefetch_tile = 0;
    // O = alpha O + P V, each group of rows over the keys any of them sees (P = 0 elsewhere).
    for (int64_t i = 0; i < rows; i += Ops::kOutRows) {
      const int group = static_cast<int>(std::min<int64_t>(Ops::kOutRows, rows - i));
      const int64_t first = tile.lo[i];
      const int64_t count = std::max<int64_t>(0, tile.hi[i + group - 1] - first);
      for (int64_t x = 0; x < dv_vectors; x += Ops::kOutVectors) {
        const int vectors = static_cast<int>(std::min<int64_t>(Ops::kOutVectors, dv_vectors - x));
        const int64_t prefetch_offset =
            ahead >= window ? prefetch_tile++ * window % (ahead - window + 1) : 0;
        output_rows<Ops::kOutRows>(group, vectors, scratch.scores + first * kQueryBlock + i, count,
                                   v_block + first * v_stride + x * kWidth, v_stride,
                                   scratch.alpha + i, scratch.out + i * job.dv_stride + x * kWidth,
                                   job.dv_stride, k_ahead + prefetch_offset);
      }
    }
  }

  // O = accumulator / row sum, rounded to the dtype as it is stored (fp32 straight into O: a
  // narrow mask's short rows of work make these per-row costs count).
  for (int64_t i = 0; i < rows; ++i) {
    const float inverse = 1.0f / scratch.row_sum[i];
    float* out = scratch.out + i * job.dv_stride;
    if (s.dtype == DType::fp32) {
      float* o_row = o_view.row<float>(batch, head, first_query + i);
      for (int64_t c = 0; c < s.d_v; ++c) o_row[c] = out[c] * inverse;
      continue;
    }
    for (int64_t c = 0; c < s.d_v; ++c) out[c] *= inverse;
    narrow_from_fp32(s.dtype, out, o_view.address(batch, head, first_query + i), s.d_v);
  }
}

}  // namespace ATTNBENCH_FLASH_CPU_NAMESPACE
}  // namespace flash_cpu
}  // namespace
}  // namespace attnbench

#endif  // ATTNBENCH_FLASH_CPU_KERNELS
