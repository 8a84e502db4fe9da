#include "harness/measure/thread_limit.h"

#include <fmt/format.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

namespace attnbench {

int cpus_available() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0) return std::max(1, CPU_COUNT(&mask));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

namespace {

// OMP_NUM_THREADS as OpenMP reads it: whole numbers of 1 or more, comma-separated for nested
// levels. OpenMP itself warns about any other value and goes on with its default, while the
// manifest would keep the value as given beside the threads used: it is refused instead.
void check_thread_variable() {
  const char* text = std::getenv("OMP_NUM_THREADS");
  if (text == nullptr) return;
  const std::string value(text);
  std::size_t start = 0;
  while (true) {
    const std::size_t end = std::min(value.find(',', start), value.size());
    const std::string count = value.substr(start, end - start);
    const bool whole =
        !count.empty() && count.size() <= 9 &&
        std::all_of(count.begin(), count.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!whole || std::stol(count) < 1) {
      throw std::invalid_argument(fmt::format(
          "OMP_NUM_THREADS '{}': needs a whole number of threads, 1 or more (or a comma-separated "
          "list of them), or unset for one thread per CPU",
          value));
    }
    if (end == value.size()) return;
    start = end + 1;
  }
}

}  // namespace

ThreadLimit limit_threads_to_cpus() {
  check_thread_variable();
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
