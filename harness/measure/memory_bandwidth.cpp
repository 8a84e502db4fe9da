#include "harness/measure/memory_bandwidth.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>

#include "harness/measure/memory_limit.h"

namespace attnbench {

namespace {

constexpr int64_t floor_bytes = int64_t{64} << 20, ceiling_bytes = int64_t{512} << 20;

// Four times the last-level cache, so no trial finds its arrays cached; sysconf reports 0 on
// some virtual machines, where 64 MiB still dwarfs the caches of the hosts we run on. Never more
// than half of what this process may still allocate (a cgroup or rlimit may hold it to less than
// three such arrays; the OOM killer would end the run): 0 when that leaves under 64 MiB each, as
// smaller arrays would measure a cache, not memory.
int64_t triad_array_bytes() {
  int64_t last_level = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
  last_level = std::max<int64_t>(last_level, sysconf(_SC_LEVEL3_CACHE_SIZE));
#endif
#ifdef _SC_LEVEL2_CACHE_SIZE
  last_level = std::max<int64_t>(last_level, sysconf(_SC_LEVEL2_CACHE_SIZE));
#endif
  int64_t bytes = std::clamp(4 * last_level, floor_bytes, ceiling_bytes);
  if (const MemoryLimit limit = memory_available_now(); limit.bytes > 0)
    bytes = std::min(bytes, static_cast<int64_t>(limit.bytes / 2 / 3));
  return bytes >= floor_bytes ? bytes : 0;
}

// operator new[] of a trivial type leaves the pages untouched: the first parallel loop places
// each one on the node of the thread that uses it (first touch), as STREAM does.
std::unique_ptr<float[]> untouched_floats(std::size_t count) {
  return std::unique_ptr<float[]>(new float[count]);
}

}  // namespace

TriadBandwidth measure_triad_bandwidth(int threads) {
  TriadBandwidth result;
  result.array_bytes = triad_array_bytes();
  if (result.array_bytes == 0) return result;  // not measured: too little memory
  const auto count = static_cast<std::ptrdiff_t>(result.array_bytes / sizeof(float));
  auto a = untouched_floats(count), b = untouched_floats(count), c = untouched_floats(count);
  float* const pa = a.get();
  const float* const pb = b.get();
  const float* const pc = c.get();
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::ptrdiff_t i = 0; i < count; ++i) {
    pa[i] = 0.0f;
    b[i] = 1.0f;
    c[i] = 2.0f;
  }
  constexpr int trials = 10;
  const double bytes = 3.0 * static_cast<double>(count) * sizeof(float);
  double total_seconds = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const float scalar = 0.5f + static_cast<float>(trial);  // no two trials store the same
    const auto start = std::chrono::steady_clock::now();
    // The same static schedule as the first touch: each thread streams the pages it placed.
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::ptrdiff_t i = 0; i < count; ++i) pa[i] = pb[i] + scalar * pc[i];
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.best_gbps = std::max(result.best_gbps, bytes / seconds / 1e9);
    total_seconds += seconds;
  }
  // Read one element so the stores cannot be dropped as dead.
  volatile float sink = pa[count / 2];
  static_cast<void>(sink);
  result.sustained_gbps = trials * bytes / total_seconds / 1e9;
  return result;
}

}  // namespace attnbench
