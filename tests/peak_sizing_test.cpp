// How the peak checks are sized: each loop bounded by time, the triad's arrays bounded by the
// cache, a cap and memory and evicted before each trial, and the bandwidth measured only in runs
// with a case left of the ridge. Two cases measure for real (a check, with and without the triad),
// bounded generously.
#include <catch2/catch.hpp>
#include <limits>
#include <string>
#include <vector>

#include "harness/measure/cache_eviction.h"
#include "harness/measure/cpu_peak.h"
#include "harness/measure/memory_bandwidth.h"
#include "harness/results/peak_checks.h"

namespace attnbench {
namespace {

constexpr int64_t mib = int64_t{1} << 20;

TEST_CASE("the triad's arrays: 4x the cache over three, capped, within memory", "[peaks]") {
  // Zen 3's 32 MiB L3: 4/3 of it per array.
  const TriadBandwidth zen3 = size_triad(32 * mib, 0);
  CHECK(zen3.array_bytes == (4 * 32 * mib + 2) / 3);
  CHECK_THAT(zen3.sizing, Catch::Contains("4x the 32 MiB last-level cache"));
  // A VM reporting a host's whole cache: capped, and the manifest says why.
  const TriadBandwidth huge = size_triad(480 * mib, 0);
  CHECK(huge.array_bytes == triad_max_array_bytes);
  CHECK_THAT(huge.sizing, Catch::Contains("capped at 64 MiB") && Catch::Contains("480 MiB"));
  // A tiny cache: raised to the minimum; none reported: the cap.
  CHECK(size_triad(1 * mib, 0).array_bytes == triad_min_array_bytes);
  CHECK(size_triad(0, 0).array_bytes == triad_max_array_bytes);
  // Half of what may still be allocated, over three; under the minimum, nothing.
  CHECK(size_triad(480 * mib, 300 * mib).array_bytes == 50 * mib);
  const TriadBandwidth starved = size_triad(480 * mib, 100 * mib);
  CHECK(starved.array_bytes == 0);
  CHECK_THAT(starved.sizing, Catch::Contains("not measured"));
  // A process already holding 225 MiB (a CUDA build's libraries): three arrays of 25 MiB keep it
  // within 300 MiB; holding 250 MiB leaves under the minimum, so nothing is measured.
  const TriadBandwidth loaded = size_triad(480 * mib, 0, 225 * mib);
  CHECK(loaded.array_bytes == 25 * mib);
  CHECK_THAT(loaded.sizing, Catch::Contains("within 300 MiB"));
  CHECK(size_triad(480 * mib, 0, 250 * mib).array_bytes == 0);
  CHECK(size_triad(480 * mib, 0, 10 * mib).array_bytes == triad_max_array_bytes);
  CHECK(resident_bytes_now() > 0);
}

TEST_CASE("evicting a buffer from the caches leaves its bytes as they were", "[peaks]") {
  // Eviction writes dirty lines back before it drops them: nothing is lost, from a buffer that
  // starts and ends inside cache lines too.
  std::vector<unsigned char> bytes(3 * 4096 + 7);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 31);
  evict_from_caches(bytes.data() + 5, bytes.size() - 9);
  evict_from_caches(bytes.data(), 0);
  for (std::size_t i = 0; i < bytes.size(); ++i)
    REQUIRE(bytes[i] == static_cast<unsigned char>(i * 31));
#if defined(__x86_64__)
  CHECK_THAT(cache_eviction_instruction(), Catch::StartsWith("clflush"));
#elif defined(__aarch64__)
  CHECK(std::string(cache_eviction_instruction()) == "dc civac");
#endif
}

TEST_CASE("the bandwidth is measured only in runs with a CPU case left of the ridge", "[peaks]") {
  // 400 GFLOP/s on 2 threads: the estimate assumes 4 GB/s, a ridge of 100 FLOP/byte.
  const BandwidthDecision decode = decide_bandwidth(400, 2, 0.9);
  CHECK(decode.measure);
  CHECK(decode.ridge_estimate == Approx(100));
  CHECK_THAT(decode.reason, Catch::StartsWith("measured") && Catch::Contains("left of"));
  const BandwidthDecision prefill = decide_bandwidth(400, 2, 1024);
  CHECK_FALSE(prefill.measure);
  CHECK_THAT(prefill.reason, Catch::StartsWith("not measured") && Catch::Contains("right of"));
  CHECK_FALSE(decide_bandwidth(400, 2, std::numeric_limits<double>::infinity()).measure);
  CHECK(decide_bandwidth(0, 2, 1024).measure);  // no peak to estimate from: measure
}

TEST_CASE("a peak check is bounded by time and says how it was sized", "[peaks]") {
  // Not a wall-clock bound (that would fail on a slow or emulated CPU, and speed is shown in
  // benchmarks): the loop runs trials until its budget has passed, at least 10, at most 2000.
  const PeakCheck without = measure_peak_check("start", false);
  CHECK(without.cpu_fma_gflops > 0);
  CHECK(without.cpu_triad_gbps == 0);
  const auto& fma = without.sizing["fma_all_threads"];
  CHECK(fma["budget_ms"] == fma_all_threads_budget_ms);
  const int trials = fma["trials"].get<int>();
  CHECK(trials >= 10);
  CHECK(trials <= 2000);
  CHECK((fma["elapsed_ms"].get<double>() >= fma_all_threads_budget_ms || trials == 2000));
  CHECK(without.sizing["triad"]["measured"] == false);

  const PeakCheck with = measure_peak_check("end", true);
  CHECK(with.cpu_triad_gbps > 0);
  const auto& triad = with.sizing["triad"];
  CHECK(triad["measured"] == true);
  CHECK(triad["array_bytes"].get<int64_t>() <= triad_max_array_bytes);
  CHECK(triad["trials"].get<int>() >= 5);
  REQUIRE(triad.contains("evicted_before_each_trial_by"));
#if defined(__x86_64__) || defined(__aarch64__)
  CHECK(triad["evicted_before_each_trial_by"] == std::string(cache_eviction_instruction()));
  CHECK(triad["evicted_before_each_trial_by"] != "nothing");
#endif
  // The sizing comes back from its line in peaks.jsonl.
  CHECK(PeakCheck::from_json(with.to_json()).sizing == with.sizing);
}

}  // namespace
}  // namespace attnbench
