#include "harness/measure/cpu_peak.h"

#include <immintrin.h>
#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <vector>

namespace attnbench {

namespace {

// Independent accumulator chains: enough to cover FMA latency (4 cycles) times two FMA pipes,
// and few enough to stay in registers (16 on AVX2, 32 on AVX-512).
constexpr int chains = 12;

typedef float Floats16 __attribute__((vector_size(64)));
typedef float Floats8 __attribute__((vector_size(32)));
typedef float Floats4 __attribute__((vector_size(16)));

// Without -ffast-math the compiler may not reassociate the chains, so every FMA executes. A
// macro rather than a template: GCC compiles a template called from a target("...") function for
// the default ISA, and will not inline it across the mismatch.
#define ATTNBENCH_FMA_LOOP(function_name, isa, Vector)                      \
  __attribute__((target(isa))) double function_name(int64_t steps) {        \
    Vector acc[chains];                                                     \
    const Vector zero = {};                                                 \
    volatile float multiplier = 0.999999f; /* unknown to the compiler */    \
    const Vector m = zero + multiplier;                                     \
    const Vector addend = zero + 1e-7f;                                     \
    for (int c = 0; c < chains; ++c) acc[c] = zero + static_cast<float>(c); \
    for (int64_t step = 0; step < steps; ++step) {                          \
      for (int c = 0; c < chains; ++c) acc[c] = acc[c] * m + addend;        \
    }                                                                       \
    float sum = 0;                                                          \
    for (int c = 0; c < chains; ++c) sum += acc[c][0];                      \
    return sum;                                                             \
  }

ATTNBENCH_FMA_LOOP(fma_loop_avx512, "avx512f", Floats16)
ATTNBENCH_FMA_LOOP(fma_loop_avx2, "avx2,fma", Floats8)
ATTNBENCH_FMA_LOOP(fma_loop_sse, "sse2", Floats4)
#undef ATTNBENCH_FMA_LOOP

// vdpbf16ps: each lane adds two bf16 products into an fp32 accumulator, so one instruction on
// 512 bits is 16 lanes x 2 products x 2 FLOPs. The operands are bf16 pairs near 1.
__attribute__((target("avx512f,avx512bf16"))) double bf16_dot_loop(int64_t steps) {
  __m512 acc[chains];
  const __m512i ones = _mm512_set1_epi16(0x3F80);  // bf16 1.0 in every half
  const __m512bh a = reinterpret_cast<__m512bh>(ones);
  volatile int tiny = 0x3380;  // bf16 6e-8, unknown to the compiler
  const __m512bh b = reinterpret_cast<__m512bh>(_mm512_set1_epi16(static_cast<short>(tiny)));
  for (int c = 0; c < chains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  for (int64_t step = 0; step < steps; ++step) {
    for (int c = 0; c < chains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  // One lane of each chain keeps the work alive (_mm512_reduce_add_ps trips GCC 12's
  // -Wuninitialized inside its own header).
  alignas(64) float lanes[16];
  float sum = 0;
  for (int c = 0; c < chains; ++c) {
    _mm512_store_ps(lanes, acc[c]);
    sum += lanes[0];
  }
  return sum;
}

bool cpu_has_bf16_dot() { return __builtin_cpu_supports("avx512bf16"); }

// The widest FMA the CPU reports (at run time), so the peak is the machine's, not the build
// flags'. Returns the FLOPs done per step.
double fma_loop(int64_t steps, double& flops_per_step) {
  if (__builtin_cpu_supports("avx512f")) {
    flops_per_step = chains * 16 * 2;
    return fma_loop_avx512(steps);
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    flops_per_step = chains * 8 * 2;
    return fma_loop_avx2(steps);
  }
  flops_per_step = chains * 4 * 2;
  return fma_loop_sse(steps);
}

// A loop's rate on all threads: the best of many short trials, and the rate over all of them.
struct LoopRates {
  double best_gflops = 0;
  double sustained_gflops = 0;
};

// The best of many short trials of `loop` on `threads` threads: a trial that another process
// interrupts only reads low, so the maximum is the machine's rate. Each trial lasts about a
// millisecond, shorter than a scheduler time slice, so on a busy machine some trials still run
// with every thread on a core of its own (trials of 15 ms were all interrupted and read half).
// The rate over all trials is what a longer loop got: well below the best, something else ran.
template <class Loop>
LoopRates loop_rates(int threads, int64_t steps, Loop loop) {
  LoopRates rates;
  double total_flops = 0, total_seconds = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const auto start = std::chrono::steady_clock::now();
    volatile double sink = 0;
    double flops_per_step = 0;
#pragma omp parallel num_threads(threads)
    {
      double per_step = 0;
      sink = sink + loop(steps, per_step);
#pragma omp single nowait
      flops_per_step = per_step;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double flops = flops_per_step * static_cast<double>(steps) * threads;
    rates.best_gflops = std::max(rates.best_gflops, flops / seconds / 1e9);
    total_flops += flops;
    total_seconds += seconds;
  }
  rates.sustained_gflops = total_flops / total_seconds / 1e9;
  return rates;
}

// About a millisecond a trial at the rates of current cores: 500k steps of 12 FMAs.
LoopRates fma_rates(int threads) { return loop_rates(threads, 500'000, fma_loop); }

// vdpbf16ps issues on fewer ports than FMA on some cores: fewer steps keep the trial short.
double bf16_dot_gflops(int threads) {
  return loop_rates(threads, 200'000,
                    [](int64_t steps, double& flops_per_step) {
                      flops_per_step = chains * 16 * 2 * 2;
                      return bf16_dot_loop(steps);
                    })
      .best_gflops;
}

double sgemm_gflops() {
  constexpr int n = 1536;
  const Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n);
  Eigen::MatrixXf c(n, n);
  double best = 0;
  for (int trial = 0; trial < 3; ++trial) {
    const auto start = std::chrono::steady_clock::now();
    c.noalias() = a * b;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * n * n * n / seconds / 1e9);
  }
  return best;
}

}  // namespace

CpuPeaks measure_cpu_peaks() {
  CpuPeaks peaks;
  peaks.threads = omp_get_max_threads();
  peaks.fma_gflops_one_thread = fma_rates(1).best_gflops;
  const LoopRates all_threads = fma_rates(peaks.threads);
  peaks.fma_gflops_all_threads = all_threads.best_gflops;
  peaks.fma_sustained_gflops_all_threads = all_threads.sustained_gflops;
  if (cpu_has_bf16_dot()) peaks.bf16_dot_gflops_all_threads = bf16_dot_gflops(peaks.threads);
  peaks.sgemm_gflops = sgemm_gflops();
  return peaks;
}

CpuPeaks measure_cpu_peak_check() {
  CpuPeaks peaks;
  peaks.threads = omp_get_max_threads();
  const LoopRates all_threads = fma_rates(peaks.threads);
  peaks.fma_gflops_all_threads = all_threads.best_gflops;
  peaks.fma_sustained_gflops_all_threads = all_threads.sustained_gflops;
  if (cpu_has_bf16_dot()) peaks.bf16_dot_gflops_all_threads = bf16_dot_gflops(peaks.threads);
  return peaks;
}

}  // namespace attnbench
