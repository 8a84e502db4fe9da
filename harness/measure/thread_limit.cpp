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

// OMP_NUM_THREADS as libgomp reads it: positive whole numbers, comma-separated for nested levels,
// each with spaces around it and an optional '+'. libgomp warns about any other value and goes
// on with its default, while the manifest would keep the value as given beside the threads used:
// such a value is refused instead.
void check_thread_variable() {
  const char* text = std::getenv("OMP_NUM_THREADS");
  if (text == nullptr) return;
  const std::string value(text);
  const auto refuse = [&value](const char* why) {
    return std::invalid_argument(
        fmt::format("OMP_NUM_THREADS '{}': {} (or unset it for one thread per CPU)", value, why));
  };
  std::size_t at = 0;
  while (true) {
    while (at < value.size() && value[at] == ' ') ++at;
    if (at < value.size() && value[at] == '+') ++at;
    while (at < value.size() && value[at] == '0') ++at;
    const std::size_t significant = at;
    while (at < value.size() && value[at] >= '0' && value[at] <= '9') ++at;
    if (at == significant)  // no digit, or only zeros
      throw refuse("needs a whole number of threads, 1 or more, or a comma-separated list of them");
    if (at - significant > 9) throw refuse("more threads than any machine has");
    while (at < value.size() && value[at] == ' ') ++at;
    if (at == value.size()) return;
    if (value[at] != ',')
      throw refuse("needs a whole number of threads, 1 or more, or a comma-separated list of them");
    ++at;
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
