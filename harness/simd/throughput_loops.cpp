#include "harness/simd/throughput_loops.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ATTNBENCH_THROUGHPUT_X86 1
#endif

namespace attnbench {

namespace {

// Independent accumulator chains: enough to cover FMA latency (4 cycles) times two FMA pipes,
// and few enough to stay in registers (16 on AVX2, 32 on AVX-512 and NEON).
constexpr int kChains = 12;

typedef float Floats16 __attribute__((vector_size(64)));
typedef float Floats8 __attribute__((vector_size(32)));
typedef float Floats4 __attribute__((vector_size(16)));

// Without -ffast-math the compiler may not reassociate the chains, so every FMA executes. A
// macro rather than a template: GCC compiles a template called from a target("...") function for
// the default ISA, and will not inline it across the mismatch. The target names every extension
// the loop's instructions need: a build for plain x86-64 fails to compile otherwise.
#define ATTNBENCH_FMA_LOOP(function_name, target_attribute, Vector)          \
  target_attribute double function_name(int64_t steps) {                     \
    Vector acc[kChains];                                                     \
    const Vector zero = {};                                                  \
    volatile float multiplier = 0.999999f; /* unknown to the compiler */     \
    const Vector m = zero + multiplier;                                      \
    const Vector addend = zero + 1e-7f;                                      \
    for (int c = 0; c < kChains; ++c) acc[c] = zero + static_cast<float>(c); \
    for (int64_t step = 0; step < steps; ++step) {                           \
      for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * m + addend;        \
    }                                                                        \
    float sum = 0;                                                           \
    for (int c = 0; c < kChains; ++c) sum += acc[c][0];                      \
    return sum;                                                              \
  }

#if defined(ATTNBENCH_THROUGHPUT_X86)
ATTNBENCH_FMA_LOOP(fma_loop_avx512, __attribute__((target("avx512f"))), Floats16)
ATTNBENCH_FMA_LOOP(fma_loop_avx2, __attribute__((target("avx2,fma"))), Floats8)
#endif
// SSE2 on x86-64 (no FMA: a multiply and an add, counted as the 2 FLOPs they are), NEON's fmla
// on aarch64 (GCC contracts the multiply-add), plain code elsewhere.
ATTNBENCH_FMA_LOOP(fma_loop_base, , Floats4)
#undef ATTNBENCH_FMA_LOOP

#if defined(ATTNBENCH_THROUGHPUT_X86)
// vdpbf16ps: each lane adds two bf16 products into an fp32 accumulator, so one instruction on
// 512 bits is 16 lanes x 2 products x 2 FLOPs. The operands are bf16 pairs near 1.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) double bf16_dot_loop(int64_t steps) {
  __m512 acc[kChains];
  const __m512i ones = _mm512_set1_epi16(0x3F80);  // bf16 1.0 in every half
  const __m512bh a = reinterpret_cast<__m512bh>(ones);
  volatile int tiny = 0x3380;  // bf16 6e-8, unknown to the compiler
  const __m512bh b = reinterpret_cast<__m512bh>(_mm512_set1_epi16(static_cast<short>(tiny)));
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  for (int64_t step = 0; step < steps; ++step) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  // One lane of each chain keeps the work alive (_mm512_reduce_add_ps trips GCC 12's
  // -Wuninitialized inside its own header).
  alignas(64) float lanes[16];
  float sum = 0;
  for (int c = 0; c < kChains; ++c) {
    _mm512_store_ps(lanes, acc[c]);
    sum += lanes[0];
  }
  return sum;
}
#endif

// FLOPs per second of one run of `loop` on this thread.
template <class Loop>
double rate_of(const CpuFeatures& features, int64_t steps, Loop loop) {
  const auto start = std::chrono::steady_clock::now();
  double flops_per_step = 0;
  volatile double sink = loop(features, steps, flops_per_step);
  static_cast<void>(sink);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return flops_per_step * static_cast<double>(steps) / seconds;
}

}  // namespace

double run_fma_loop(const CpuFeatures& features, int64_t steps, double& flops_per_step) {
#if defined(ATTNBENCH_THROUGHPUT_X86)
  if (features.avx512f) {
    flops_per_step = kChains * 16 * 2;
    return fma_loop_avx512(steps);
  }
  if (features.avx2 && features.fma) {
    flops_per_step = kChains * 8 * 2;
    return fma_loop_avx2(steps);
  }
#else
  static_cast<void>(features);
#endif
  flops_per_step = kChains * 4 * 2;
  return fma_loop_base(steps);
}

double run_bf16_dot_loop(const CpuFeatures& features, int64_t steps, double& flops_per_step) {
  flops_per_step = kChains * 16 * 2 * 2;
#if defined(ATTNBENCH_THROUGHPUT_X86)
  if (features.avx512f && features.avx512bw && features.avx512bf16) return bf16_dot_loop(steps);
#else
  static_cast<void>(features);
  static_cast<void>(steps);
#endif
  flops_per_step = 0;
  return 0;
}

bool bf16_dot_outpaces_fma(const CpuFeatures& features) {
  if (!(features.avx512f && features.avx512bw && features.avx512bf16)) return false;
  double dot = 0, fma = 0;
  for (int trial = 0; trial < 7; ++trial) {
    dot = std::max(dot, rate_of(features, 100'000, run_bf16_dot_loop));
    fma = std::max(fma, rate_of(features, 100'000, run_fma_loop));
  }
  return dot > fma;
}

}  // namespace attnbench
