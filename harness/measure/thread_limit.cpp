#include "harness/measure/thread_limit.h"

#include <fmt/format.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

namespace attnbench {

int cpus_available() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0) return std::max(1, CPU_COUNT(&mask));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

ThreadLimit limit_threads_to_cpus() {
  ThreadLimit limit;
  limit.requested = omp_get_max_threads();
  const int cpus = cpus_available();
  if (limit.requested > most_threads_per_cpu * cpus) {
    throw std::invalid_argument(fmt::format(
        "OMP_NUM_THREADS asks for {} threads on {} CPU(s): more than {} per CPU is refused (unset "
        "it for one thread per CPU)",
        limit.requested, cpus, most_threads_per_cpu));
  }
  limit.used = std::min(limit.requested, cpus);
  if (limit.used != limit.requested) omp_set_num_threads(limit.used);
  return limit;
}

}  // namespace attnbench
