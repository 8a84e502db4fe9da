// One variant against the oracle on a list of shapes: what the forward tests
// (variant_oracle_test.cpp) and the backward tests (variant_backward_test.cpp) share. A shape the
// variant does not take is skipped with a warning that says why; a variant whose device is absent
// (no GPU) is skipped as a whole, with the reason. Every failure names the variant, the shape, the
// input distribution and the seed, so it can be replayed.
#pragma once

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "harness/measure/checked_run.h"
#include "harness/measure/inputs.h"
#include "harness/variant/registry.h"
#include "tests/edge_shapes.h"

namespace attnbench::testing {

inline void check_against_oracle(const RegisteredVariant& registered,
                                 const std::vector<NamedShape>& shapes, bool with_weights,
                                 const std::vector<Distribution>& distributions,
                                 const std::function<uint64_t(Distribution)>& seed_of) {
  const VariantInfo& info = registered.info;
  std::string unavailable;
  if (!device_available(info.device, &unavailable)) {
    WARN("SKIPPED " << info.name << ": " << unavailable);
    return;
  }
  auto executor = make_executor(info.device);
  for (const auto& [shape_name, shape] : shapes) {
    if (const std::string skip = unsupported_reason(info, shape, with_weights); !skip.empty()) {
      WARN("SKIPPED " << info.name << " on " << shape_name << ": " << skip);
      continue;
    }
    auto variant = registered.make();
    executor->workspace().release_all();
    variant->prepare(shape, executor->workspace());
    for (Distribution distribution : distributions) {
      const uint64_t seed = seed_of(distribution);
      const HostTensors inputs = make_inputs(shape, distribution, seed);
      const OracleReport report = run_checked(*variant, *executor, inputs, default_scale(shape),
                                              with_weights, OracleOptions{});
      INFO(fmt::format("{} on {} ({}), {} inputs, seed {}: rel L2 {:.3g}, max abs {:.3g}",
                       info.name, shape_name, describe(shape), to_string(distribution), seed,
                       report.rel_l2_err, report.max_abs_err));
      INFO(report.failure);
      CHECK(report.passed);
    }
  }
}

}  // namespace attnbench::testing
