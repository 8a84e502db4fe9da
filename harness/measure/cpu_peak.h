// The CPU's measured peaks, stored in each run's manifest so every GFLOP/s can be read as a
// fraction of what this machine actually does (not of a datasheet number).
#pragma once

namespace attnbench {

struct CpuPeaks {
  double fma_gflops_one_thread = 0;  // an FMA loop with no memory traffic
  double fma_gflops_all_threads = 0;
  // A vdpbf16ps loop (bf16 products, fp32 accumulation) on all threads; 0 when the CPU lacks
  // AVX512_BF16, where bf16 runs widened to fp32 on the FMA units.
  double bf16_dot_gflops_all_threads = 0;
  double sgemm_gflops = 0;  // a large Eigen SGEMM on all threads
  int threads = 0;
};

// Takes about a second.
CpuPeaks measure_cpu_peaks();

}  // namespace attnbench
