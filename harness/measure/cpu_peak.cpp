#include "harness/measure/cpu_peak.h"

#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <vector>

#include "harness/measure/memory_bandwidth.h"
#include "harness/simd/cpu_features.h"
#include "harness/simd/throughput_loops.h"

namespace attnbench {

namespace {

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
LoopRates fma_rates(int threads) {
  return loop_rates(threads, 500'000, [](int64_t steps, double& flops_per_step) {
    return run_fma_loop(CpuFeatures::of_this_cpu(), steps, flops_per_step);
  });
}

// vdpbf16ps issues on fewer ports than FMA on some cores: fewer steps keep the trial short.
double bf16_dot_gflops(int threads) {
  return loop_rates(threads, 200'000,
                    [](int64_t steps, double& flops_per_step) {
                      return run_bf16_dot_loop(CpuFeatures::of_this_cpu(), steps, flops_per_step);
                    })
      .best_gflops;
}

// TDPBF16PS runs about 16 times the FLOPs of an FMA step per instruction: fewer steps again.
double amx_bf16_gflops(int threads) {
  return loop_rates(threads, 20'000,
                    [](int64_t steps, double& flops_per_step) {
                      return run_amx_bf16_loop(CpuFeatures::of_this_cpu(), steps, flops_per_step);
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
  if (CpuFeatures::of_this_cpu().avx512bf16)
    peaks.bf16_dot_gflops_all_threads = bf16_dot_gflops(peaks.threads);
  peaks.sgemm_gflops = sgemm_gflops();
  peaks.triad_gbps_all_threads = measure_triad_bandwidth(peaks.threads).best_gbps;
  if (CpuFeatures::of_this_cpu().amx_bf16)
    peaks.amx_bf16_gflops_all_threads = amx_bf16_gflops(peaks.threads);
  return peaks;
}

CpuPeaks measure_cpu_peak_check() {
  CpuPeaks peaks;
  peaks.threads = omp_get_max_threads();
  const LoopRates all_threads = fma_rates(peaks.threads);
  peaks.fma_gflops_all_threads = all_threads.best_gflops;
  peaks.fma_sustained_gflops_all_threads = all_threads.sustained_gflops;
  if (CpuFeatures::of_this_cpu().avx512bf16)
    peaks.bf16_dot_gflops_all_threads = bf16_dot_gflops(peaks.threads);
  peaks.triad_gbps_all_threads = measure_triad_bandwidth(peaks.threads).best_gbps;
  if (CpuFeatures::of_this_cpu().amx_bf16)
    peaks.amx_bf16_gflops_all_threads = amx_bf16_gflops(peaks.threads);
  return peaks;
}

}  // namespace attnbench
