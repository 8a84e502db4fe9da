#include "harness/measure/cpu_peak.h"

#include <fmt/format.h>
#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
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
  LoopSizing sizing;
};

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// The best of short trials of `loop` on `threads` threads, run until `budget_ms` has passed (at
// least 10 trials, at most 2000): a trial that another process
// interrupts only reads low, so the maximum is the machine's rate. Each trial lasts about a
// millisecond, shorter than a scheduler time slice, so on a busy machine some trials still run
// with every thread on a core of its own (trials of 15 ms were all interrupted and read half).
// The rate over all trials is what a longer loop got: well below the best, something else ran.
template <class Loop>
LoopRates loop_rates(int threads, int64_t steps, double budget_ms, Loop loop) {
  LoopRates rates;
  double total_flops = 0, total_seconds = 0;
  constexpr int min_trials = 10, max_trials = 2000;
  const auto began = std::chrono::steady_clock::now();
  int trial = 0;
  for (; trial < max_trials && (trial < min_trials || milliseconds_since(began) < budget_ms);
       ++trial) {
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
  rates.sizing = {trial, budget_ms, milliseconds_since(began)};
  return rates;
}

// About a millisecond a trial at the rates of current cores: 500k steps of 12 FMAs.
LoopRates fma_rates(int threads, double budget_ms) {
  return loop_rates(threads, 500'000, budget_ms, [](int64_t steps, double& flops_per_step) {
    return run_fma_loop(CpuFeatures::of_this_cpu(), steps, flops_per_step);
  });
}

// vdpbf16ps issues on fewer ports than FMA on some cores: fewer steps keep the trial short.
LoopRates bf16_dot_rates(int threads) {
  return loop_rates(threads, 200'000, bf16_dot_budget_ms,
                    [](int64_t steps, double& flops_per_step) {
                      return run_bf16_dot_loop(CpuFeatures::of_this_cpu(), steps, flops_per_step);
                    });
}

// TDPBF16PS runs about 16 times the FLOPs of an FMA step per instruction: fewer steps again.
// Measured last in a check: AMX lowers the core clock for a while.
LoopRates amx_bf16_rates(int threads) {
  return loop_rates(threads, 20'000, amx_bf16_budget_ms, [](int64_t steps, double& flops_per_step) {
    return run_amx_bf16_loop(CpuFeatures::of_this_cpu(), steps, flops_per_step);
  });
}

// The bf16 roofs where the CPU has their units, into `peaks` (its threads set): vdpbf16ps, and
// TDPBF16PS on AMX tiles (called last in a check: AMX lowers the core clock for a while).
void measure_bf16_dot(CpuPeaks& peaks) {
  if (!CpuFeatures::of_this_cpu().avx512bf16) return;
  const LoopRates bf16 = bf16_dot_rates(peaks.threads);
  peaks.bf16_dot_gflops_all_threads = bf16.best_gflops;
  peaks.bf16_dot = bf16.sizing;
}

void measure_amx_bf16(CpuPeaks& peaks) {
  if (!CpuFeatures::of_this_cpu().amx_bf16) return;
  const LoopRates amx = amx_bf16_rates(peaks.threads);
  peaks.amx_bf16_gflops_all_threads = amx.best_gflops;
  peaks.amx_bf16 = amx.sizing;
}

// 1024^3: 2.1 GFLOP, about 10 ms a product at 200 GFLOP/s, large enough that Eigen's blocking
// reaches its rate (12 MiB of matrices); products until the budget has passed, at least two (the
// first pays for packing buffers and page faults).
double sgemm_gflops(LoopSizing& sizing, int& n_out) {
  constexpr int n = 1024;
  n_out = n;
  const Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n);
  Eigen::MatrixXf c(n, n);
  double best = 0;
  const auto began = std::chrono::steady_clock::now();
  int trial = 0;
  for (; trial < 50 && (trial < 2 || milliseconds_since(began) < sgemm_budget_ms); ++trial) {
    const auto start = std::chrono::steady_clock::now();
    c.noalias() = a * b;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * n * n * n / seconds / 1e9);
  }
  sizing = {trial, sgemm_budget_ms, milliseconds_since(began)};
  return best;
}

}  // namespace

BandwidthDecision decide_bandwidth(double compute_peak_gflops, int threads,
                                   double lowest_intensity) {
  BandwidthDecision decision;
  if (!std::isfinite(lowest_intensity)) {
    decision.measure = false;
    decision.reason = "not measured: the run has no CPU case";
    return decision;
  }
  const double assumed_gbps = assumed_low_gbps_per_thread * std::max(threads, 1);
  decision.ridge_estimate = compute_peak_gflops / assumed_gbps;
  decision.measure = !(compute_peak_gflops > 0) || lowest_intensity < decision.ridge_estimate;
  decision.reason = fmt::format(
      "{}: the lowest arithmetic intensity of the run's CPU cases, {:.4g} FLOP/byte, is {} the "
      "ridge estimate {:.4g} ({:.4g} GFLOP/s over an assumed low {:.4g} GB/s, {:.4g} per thread, "
      "which errs toward measuring)",
      decision.measure ? "measured" : "not measured", lowest_intensity,
      decision.measure ? "left of" : "right of", decision.ridge_estimate, compute_peak_gflops,
      assumed_gbps, assumed_low_gbps_per_thread);
  return decision;
}

CpuPeaks measure_cpu_peaks(double lowest_intensity) {
  CpuPeaks peaks;
  peaks.threads = omp_get_max_threads();
  const LoopRates one_thread = fma_rates(1, fma_one_thread_budget_ms);
  peaks.fma_gflops_one_thread = one_thread.best_gflops;
  peaks.fma_one_thread = one_thread.sizing;
  const LoopRates all_threads = fma_rates(peaks.threads, fma_all_threads_budget_ms);
  peaks.fma_gflops_all_threads = all_threads.best_gflops;
  peaks.fma_sustained_gflops_all_threads = all_threads.sustained_gflops;
  peaks.fma_all_threads = all_threads.sizing;
  measure_bf16_dot(peaks);
  peaks.sgemm_gflops = sgemm_gflops(peaks.sgemm, peaks.sgemm_n);
  peaks.bandwidth =
      decide_bandwidth(std::max(peaks.fma_gflops_all_threads, peaks.bf16_dot_gflops_all_threads),
                       peaks.threads, lowest_intensity);
  if (peaks.bandwidth.measure) {
    peaks.triad = measure_triad_bandwidth(peaks.threads, triad_budget_ms, read_budget_ms);
    peaks.triad_gbps_all_threads = peaks.triad.best_gbps;
    peaks.read_gbps_all_threads = peaks.triad.read_best_gbps;
  }
  measure_amx_bf16(peaks);
  return peaks;
}

CpuPeaks measure_cpu_peak_check(bool with_bandwidth) {
  CpuPeaks peaks;
  peaks.threads = omp_get_max_threads();
  const LoopRates all_threads = fma_rates(peaks.threads, fma_all_threads_budget_ms);
  peaks.fma_gflops_all_threads = all_threads.best_gflops;
  peaks.fma_sustained_gflops_all_threads = all_threads.sustained_gflops;
  peaks.fma_all_threads = all_threads.sizing;
  measure_bf16_dot(peaks);
  peaks.bandwidth.measure = with_bandwidth;
  if (with_bandwidth) {
    // A later check: the run's own memory is not the check's fixed cost (memory_bandwidth.h).
    peaks.triad = measure_triad_bandwidth(peaks.threads, triad_budget_ms, read_budget_ms, false);
    peaks.triad_gbps_all_threads = peaks.triad.best_gbps;
    peaks.read_gbps_all_threads = peaks.triad.read_best_gbps;
  }
  measure_amx_bf16(peaks);
  return peaks;
}

}  // namespace attnbench
