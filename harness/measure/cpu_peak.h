// The CPU's measured peaks, stored in each run's manifest so every GFLOP/s can be read as a
// fraction of what this machine actually does (not of a datasheet number).
#pragma once

namespace attnbench {

struct CpuPeaks {
  double fma_gflops_one_thread = 0;   // an FMA loop with no memory traffic
  double fma_gflops_all_threads = 0;  // the best of many short trials: the machine's rate
  // The same loop's rate over all its trials (about 0.2 s): what a program got while the peak
  // was measured. Well below the best, other work was running.
  double fma_sustained_gflops_all_threads = 0;
  // A vdpbf16ps loop (bf16 products, fp32 accumulation) on all threads; 0 when the CPU lacks
  // AVX512_BF16, where bf16 runs widened to fp32 on the FMA units.
  double bf16_dot_gflops_all_threads = 0;
  // TDPBF16PS (AMX tiles) on all threads, measured last (AMX lowers the core clock for a while);
  // 0 where the CPU has no usable AMX.
  double amx_bf16_gflops_all_threads = 0;
  double sgemm_gflops = 0;  // a large Eigen SGEMM on all threads
  // STREAM triad on all threads (harness/measure/memory_bandwidth.h), best trial: the roof of
  // decode's "% of bandwidth".
  double triad_gbps_all_threads = 0;
  int threads = 0;
};

// Takes about a second and a half.
CpuPeaks measure_cpu_peaks();

// Only the all-thread peaks "% of peak" and "% of bandwidth" are read against (FMA, vdpbf16ps
// where present, the triad bandwidth), in about half a second: what a run re-checks between
// variants and at its end, because a peak measured once, while something else ran, silently
// rescales every record of the run.
CpuPeaks measure_cpu_peak_check();

}  // namespace attnbench
