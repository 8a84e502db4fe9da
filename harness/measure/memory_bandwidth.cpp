#include "harness/measure/memory_bandwidth.h"

#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <memory>

#include "harness/measure/cache_eviction.h"
#include "harness/measure/memory_limit.h"

namespace attnbench {

namespace {

int64_t last_level_cache_bytes() {
  int64_t last_level = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
  last_level = std::max<int64_t>(last_level, sysconf(_SC_LEVEL3_CACHE_SIZE));
#endif
#ifdef _SC_LEVEL2_CACHE_SIZE
  last_level = std::max<int64_t>(last_level, sysconf(_SC_LEVEL2_CACHE_SIZE));
#endif
  return last_level;
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// operator new[] of a trivial type leaves the pages untouched: the first parallel loop places
// each one on the node of the thread that uses it (first touch), as STREAM does.
std::unique_ptr<float[]> untouched_floats(std::size_t count) {
  return std::unique_ptr<float[]>(new float[count]);
}

// Every line of the three arrays out of every cache level before a trial, each thread evicting
// the part it streams (the static schedule's share), so the trial reads memory whatever the size
// of the last-level cache: on a large one a trial after a warm trial would read partly from it.
void evict_arrays(const float* a, const float* b, const float* c, std::ptrdiff_t count,
                  int threads) {
#pragma omp parallel num_threads(threads)
  {
    const std::ptrdiff_t parts = omp_get_num_threads(), part = omp_get_thread_num();
    const std::ptrdiff_t first = count * part / parts, last = count * (part + 1) / parts;
    for (const float* array : {a, b, c})
      evict_from_caches(array + first, static_cast<std::size_t>(last - first) * sizeof(float));
  }
}

// The read-only roof: every element of the three arrays summed, the same static schedule as their
// first touch, so each thread reads the pages it placed. omp simd keeps several partial sums per
// thread (a vector of them), so the adds never wait on each other and only memory bounds the loop.
void measure_read(const float* a, const float* b, const float* c, std::ptrdiff_t count, int threads,
                  double budget_ms, TriadBandwidth& result) {
  constexpr int min_trials = 5, max_trials = 1000;
  const double bytes = 3.0 * static_cast<double>(count) * sizeof(float);
  double total_seconds = 0, spent_seconds = 0;  // the trials; the trials and their evictions
  float checksum = 0;
  int trial = 0;
  for (; trial < max_trials && (trial < min_trials || spent_seconds * 1e3 < budget_ms); ++trial) {
    float sum = 0;
    const auto evicting = std::chrono::steady_clock::now();
    evict_arrays(a, b, c, count, threads);
    const auto start = std::chrono::steady_clock::now();
#pragma omp parallel for simd schedule(static) num_threads(threads) reduction(+ : sum)
    for (std::ptrdiff_t i = 0; i < count; ++i) sum += a[i] + b[i] + c[i];
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.read_best_gbps = std::max(result.read_best_gbps, bytes / seconds / 1e9);
    total_seconds += seconds;
    spent_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - evicting).count();
    checksum += sum;
  }
  // The sums are used, so no trial's loads can be dropped as dead.
  volatile float sink = checksum;
  static_cast<void>(sink);
  result.read_trials = trial;
  result.read_budget_ms = budget_ms;
  result.read_sustained_gbps = trial * bytes / total_seconds / 1e9;
}

}  // namespace

TriadBandwidth size_triad(int64_t last_level, int64_t available, int64_t resident) {
  TriadBandwidth sized;
  const int64_t wanted = (4 * last_level + 2) / 3;
  int64_t bytes = std::clamp(wanted, triad_min_array_bytes, triad_max_array_bytes);
  if (last_level <= 0) {
    // sysconf reports 0 on some virtual machines: the cap still dwarfs the caches of our hosts.
    bytes = triad_max_array_bytes;
    sized.sizing =
        fmt::format("{:.0f} MiB per array: the last-level cache is not reported", mib(bytes));
  } else if (wanted > triad_max_array_bytes) {
    sized.sizing = fmt::format(
        "capped at {:.0f} MiB per array ({:.0f} MiB in all): the last-level cache reads {:.0f} "
        "MiB, a host's shared cache of which this run's threads hold a part; 4x it would cost "
        "seconds and over 300 MB, so the arrays are evicted from every cache before each trial "
        "instead where this build can (evicted_before_each_trial_by)",
        mib(bytes), 3 * mib(bytes), mib(last_level));
  } else {
    sized.sizing = fmt::format(
        "{:.0f} MiB per array: 4x the {:.0f} MiB last-level cache over "
        "three arrays{}",
        mib(bytes), mib(last_level),
        wanted < triad_min_array_bytes ? ", raised to the minimum" : "");
  }
  // Never more than half of what this process may still allocate (a cgroup or rlimit may hold
  // it to less than three such arrays; the OOM killer would end the run).
  if (available > 0 && bytes > available / 2 / 3) {
    bytes = available / 2 / 3;
    sized.sizing += fmt::format(
        "; lowered to {:.0f} MiB, half of the {:.0f} MiB this process may "
        "still allocate over three",
        mib(bytes), mib(available));
  }
  if (const int64_t room = (triad_process_budget_bytes - resident) / 3;
      resident > 0 && bytes > room) {
    bytes = std::max<int64_t>(room, 0);
    sized.sizing += fmt::format(
        "; lowered to {:.0f} MiB so the process stays within {:.0f} MiB (it held {:.0f} MiB "
        "before the check)",
        mib(bytes), mib(triad_process_budget_bytes), mib(resident));
  }
  if (bytes < triad_min_array_bytes) {
    // Smaller arrays would measure a cache, not memory.
    sized.sizing += fmt::format("; not measured: under the {:.0f} MiB minimum per array",
                                mib(triad_min_array_bytes));
    bytes = 0;
  }
  sized.array_bytes = bytes;
  return sized;
}

int64_t resident_bytes_now() {
  // statm: sizes in pages; the second field is the resident set. Read as every small /proc
  // file is: a bounded read of a regular file.
  std::FILE* file = std::fopen("/proc/self/statm", "r");
  if (file == nullptr) return 0;
  long long size = 0, resident = 0;
  const int read = std::fscanf(file, "%lld %lld", &size, &resident);
  std::fclose(file);
  if (read != 2 || resident <= 0) return 0;
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

TriadBandwidth measure_triad_bandwidth(int threads, double budget_ms, double read_budget_ms,
                                       bool within_process_budget) {
  const auto began = std::chrono::steady_clock::now();
  const MemoryLimit limit = memory_available_now();
  TriadBandwidth result =
      size_triad(last_level_cache_bytes(), static_cast<int64_t>(std::max<double>(0, limit.bytes)),
                 within_process_budget ? resident_bytes_now() : 0);
  result.budget_ms = budget_ms;
  if (result.array_bytes == 0) return result;  // not measured: too little memory
  result.eviction = cache_eviction_instruction();
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
  constexpr int min_trials = 5, max_trials = 1000;
  const double bytes = 3.0 * static_cast<double>(count) * sizeof(float);
  double total_seconds = 0, spent_seconds = 0;  // the trials; the trials and their evictions
  int trial = 0;
  for (; trial < max_trials && (trial < min_trials || spent_seconds * 1e3 < budget_ms); ++trial) {
    const float scalar = 0.5f + static_cast<float>(trial);  // no two trials store the same
    const auto evicting = std::chrono::steady_clock::now();
    evict_arrays(pa, pb, pc, count, threads);
    const auto start = std::chrono::steady_clock::now();
    // The same static schedule as the first touch: each thread streams the pages it placed.
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::ptrdiff_t i = 0; i < count; ++i) pa[i] = pb[i] + scalar * pc[i];
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.best_gbps = std::max(result.best_gbps, bytes / seconds / 1e9);
    total_seconds += seconds;
    spent_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - evicting).count();
  }
  // Read one element so the stores cannot be dropped as dead.
  volatile float sink = pa[count / 2];
  static_cast<void>(sink);
  result.trials = trial;
  result.sustained_gbps = trial * bytes / total_seconds / 1e9;
  measure_read(pa, pb, pc, count, threads, read_budget_ms, result);
  result.elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count();
  return result;
}

}  // namespace attnbench
