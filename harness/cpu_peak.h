// The CPU's measured peaks, stored in each run's manifest so every GFLOP/s can be read as a
// fraction of what this machine actually does (not of a datasheet number).
#pragma once

namespace attnbench {

struct CpuPeaks {
  double fma_gflops_one_thread = 0;  // an FMA loop with no memory traffic
  double fma_gflops_all_threads = 0;
  double sgemm_gflops = 0;  // a large Eigen SGEMM on all threads
  int threads = 0;
};

// Takes about a second.
CpuPeaks measure_cpu_peaks();

}  // namespace attnbench
