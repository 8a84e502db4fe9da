// The CPU's measured peaks, stored in each run's manifest so every GFLOP/s can be read as a
// fraction of what this machine actually does (not of a datasheet number). Every loop is bounded
// by time, not by a count: a check costs about the same on a slow core as on a fast one.
#pragma once

#include <limits>
#include <string>

#include "harness/measure/memory_bandwidth.h"

namespace attnbench {

// How one loop check was sized: short trials until its time budget has passed.
struct LoopSizing {
  int trials = 0;
  double budget_ms = 0;
  double elapsed_ms = 0;
};

// Whether a run measures the memory bandwidth, and why (a sentence for the manifest).
struct BandwidthDecision {
  bool measure = true;
  double ridge_estimate = 0;  // FLOPs per byte; 0 when not estimated
  std::string reason;
};

struct CpuPeaks {
  double fma_gflops_one_thread = 0;   // an FMA loop with no memory traffic
  double fma_gflops_all_threads = 0;  // the best of many short trials: the machine's rate
  // The same loop's rate over all its trials (about 0.1 s): what a program got while the peak
  // was measured. Well below the best, other work was running.
  double fma_sustained_gflops_all_threads = 0;
  // A vdpbf16ps loop (bf16 products, fp32 accumulation) on all threads; 0 when the CPU lacks
  // AVX512_BF16, where bf16 runs widened to fp32 on the FMA units.
  double bf16_dot_gflops_all_threads = 0;
  // TDPBF16PS (AMX tiles) on all threads, measured last (AMX lowers the core clock for a while);
  // 0 where the CPU has no usable AMX.
  double amx_bf16_gflops_all_threads = 0;
  double sgemm_gflops = 0;  // an Eigen SGEMM on all threads
  // STREAM triad on all threads (harness/measure/memory_bandwidth.h), best trial: the roof of
  // decode's "% of bandwidth". 0 when not measured (see `bandwidth`).
  double triad_gbps_all_threads = 0;
  // A read-only sum over the triad's arrays, best trial: the roof decode (which only reads) is
  // judged by where it is above the triad. 0 when not measured.
  double read_gbps_all_threads = 0;
  int threads = 0;

  // How each check was sized, for the manifest.
  LoopSizing fma_one_thread, fma_all_threads, bf16_dot, amx_bf16;
  LoopSizing sgemm;
  int sgemm_n = 0;
  TriadBandwidth triad;
  BandwidthDecision bandwidth;
};

// The time budgets of the loops (milliseconds): each trial lasts about a millisecond, so a budget
// of 100 is about 100 trials, enough for some to run uninterrupted on a busy machine.
inline constexpr double fma_one_thread_budget_ms = 50;
inline constexpr double fma_all_threads_budget_ms = 100;
inline constexpr double bf16_dot_budget_ms = 60;
inline constexpr double amx_bf16_budget_ms = 60;
inline constexpr double sgemm_budget_ms = 100;
inline constexpr double triad_budget_ms = 100;
inline constexpr double read_budget_ms = 60;

// The bandwidth the ridge estimate assumes, per thread (GB/s): below what any host we run on
// moves (Zen 3: 12, Zen 4: 15 per thread on two threads), so the estimated ridge lies right of the
// true one and a case near the ridge is measured rather than left without a bandwidth roof.
inline constexpr double assumed_low_gbps_per_thread = 2;

// The rule: a run measures the bandwidth when one of its CPU cases has an arithmetic intensity
// (forward FLOPs over the fewest bytes) below the ridge estimated from `compute_peak_gflops` (the
// best of the FMA and bf16 peaks just measured) over assumed_low_gbps_per_thread * threads. Cases
// right of the ridge are bound by compute, and their records never read "% of bandwidth".
// `lowest_intensity` is infinity when the run has no CPU case.
BandwidthDecision decide_bandwidth(double compute_peak_gflops, int threads,
                                   double lowest_intensity);

// About half a second, and a quarter more with the bandwidth: the FMA loop on one and on all
// threads, the vdpbf16ps loop, an SGEMM, and the triad where decide_bandwidth says so.
CpuPeaks measure_cpu_peaks(double lowest_intensity = 0);

// Only the all-thread peaks "% of peak" and "% of bandwidth" are read against (FMA, vdpbf16ps
// where present, the triad bandwidth when `with_bandwidth`), in about a fifth of a second (and
// the triad's): what a run re-checks between variants and at its end, because a peak measured
// once, while something else ran, silently rescales every record of the run.
CpuPeaks measure_cpu_peak_check(bool with_bandwidth);

}  // namespace attnbench
