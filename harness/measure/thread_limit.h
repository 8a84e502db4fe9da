// How many threads a run may use: OpenMP's count (OMP_NUM_THREADS, or one per CPU) held to the
// CPUs this process may run on. More threads than CPUs only time-slice the same cores (and a
// peak check on 3,000 threads ran for minutes); a count past any machine's size (OMP_NUM_THREADS
// = 100000) made libgomp crash creating them.
#pragma once

namespace attnbench {

struct ThreadLimit {
  int requested = 0;  // omp_get_max_threads() as the environment set it
  int used = 0;       // what every parallel region of this process now gets
};

// The CPUs in this process's affinity mask (taskset, cgroup cpusets), at least 1.
int cpus_available();

// A request above this many threads per available CPU is refused as a mistake, not clamped.
inline constexpr int most_threads_per_cpu = 64;

// Clamps OpenMP's thread count to cpus_available() (omp_set_num_threads), returning both counts.
// Throws std::invalid_argument naming OMP_NUM_THREADS when the request is over
// most_threads_per_cpu per CPU.
ThreadLimit limit_threads_to_cpus();

}  // namespace attnbench
