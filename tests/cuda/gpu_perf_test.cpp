// Hidden by default (run with `attnbench_tests "[.perf]"` on a GPU machine): the CUDA variants on
// the shapes the project's GPU targets are stated for, each checked by the oracle and then timed,
// printed as TFLOP/s (causal: unmasked pairs only) or, for decode, as GB/s of K and V read. A
// quick look before a full sweep; the sweep is what records results.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

#include "harness/measure/checked_run.h"
#include "harness/measure/gpu.h"
#include "harness/measure/inputs.h"
#include "harness/variant/registry.h"
#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

using testing::make_shape;

double unmasked_pairs(const Shape& s) {
  double pairs = 0;
  for (int64_t i = 0; i < s.seq_q; ++i) pairs += static_cast<double>(s.visible_keys(i));
  return pairs * static_cast<double>(s.batch * s.heads);
}

// Median milliseconds of `repetitions` timed runs after one warm-up; "" or the failure.
std::string time_variant(const std::string& name, const Shape& shape, double& median_ms) {
  const RegisteredVariant* registered = Registry::instance().find(name);
  if (registered == nullptr) return "not registered";
  const std::string skip = unsupported_reason(registered->info, shape, false);
  if (!skip.empty()) return skip;
  auto executor = make_executor(Device::cuda);
  auto variant = registered->make();
  executor->workspace().release_all();
  variant->prepare(shape, executor->workspace());
  const HostTensors inputs = make_inputs(shape, Distribution::normal, 11);
  const OracleReport report =
      run_checked(*variant, *executor, inputs, default_scale(shape), false, OracleOptions{});
  if (!report.passed) return "oracle: " + report.failure;
  const Problem problem = executor->problem(default_scale(shape));
  executor->timed_run_ms(*variant, problem);
  std::vector<double> times;
  for (int i = 0; i < 5; ++i) times.push_back(executor->timed_run_ms(*variant, problem));
  std::sort(times.begin(), times.end());
  median_ms = times[times.size() / 2];
  return {};
}

TEST_CASE("CUDA variants on the target shapes", "[.perf][cuda]") {
  if (!query_gpu().available) {
    WARN("SKIPPED: no GPU");
    return;
  }
  for (const bool causal : {false, true}) {
    for (const int64_t d : {64, 128}) {
      for (const int64_t n : {1024, 4096, 16384}) {
        const Shape shape = make_shape(1, 16, 16, n, n, d, d, causal);
        for (const char* name : {"fused", "cublas", "cublas_tf32", "chunked_cuda"}) {
          if (n > 4096 && std::string(name) != "fused") continue;
          double ms = 0;
          const std::string failure = time_variant(name, shape, ms);
          const double tflops = 2.0 * unmasked_pairs(shape) * (d + d) / (ms * 1e-3) / 1e12;
          WARN(fmt::format(
              "{:<13} {:<32} {}", name, describe(shape),
              failure.empty() ? fmt::format("{:8.3f} ms {:6.2f} TFLOP/s", ms, tflops) : failure));
          CHECK(failure.empty());
        }
      }
    }
  }
  // Decode: one query row against a long cache; memory-bound, so GB/s of K and V.
  for (const int64_t kv_heads : {16, 2}) {
    const Shape shape = make_shape(1, 16, kv_heads, 1, 131072, 128, 128, true);
    for (const char* name : {"chunked_cuda", "fused"}) {
      double ms = 0;
      const std::string failure = time_variant(name, shape, ms);
      const double bytes = 4.0 * static_cast<double>(shape.k_elements() + shape.v_elements());
      WARN(fmt::format("{:<13} {:<32} {}", name, describe(shape),
                       failure.empty()
                           ? fmt::format("{:8.3f} ms {:7.1f} GB/s", ms, bytes / (ms * 1e-3) / 1e9)
                           : failure));
      CHECK(failure.empty());
    }
  }
}

}  // namespace
}  // namespace attnbench
