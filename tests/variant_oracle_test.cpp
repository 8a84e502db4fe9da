// Every registered variant against the oracle, on every edge shape, every input distribution and
// every dtype and layout it declares. A new variant is tested here with no edit to this file.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <random>

#include "harness/measure/checked_run.h"
#include "harness/measure/inputs.h"
#include "harness/variant/registry.h"
#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

// Fresh inputs every run; the seed is printed with any failure so it can be replayed.
uint64_t fresh_seed() {
  static std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

void check_variant_on(const RegisteredVariant& registered, bool with_weights,
                      const std::vector<testing::NamedShape>& shapes) {
  const VariantInfo& info = registered.info;
  std::string unavailable;
  if (!device_available(info.device, &unavailable)) {
    WARN("SKIPPED " << info.name << ": " << unavailable);
    return;
  }
  auto executor = make_executor(info.device);
  for (const auto& [shape_name, edge_shape] : shapes) {
    const Shape& shape = edge_shape;
    const std::string skip = unsupported_reason(info, shape, with_weights);
    if (!skip.empty()) {
      WARN("SKIPPED " << info.name << " on " << shape_name << ": " << skip);
      continue;
    }
    auto variant = registered.make();
    executor->workspace().release_all();
    variant->prepare(shape, executor->workspace());
    for (Distribution distribution : all_distributions()) {
      const uint64_t seed = fresh_seed();
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

TEST_CASE("every variant matches the oracle on every edge shape and distribution",
          "[oracle][variants]") {
  for (const RegisteredVariant& registered : Registry::instance().all()) {
    DYNAMIC_SECTION(registered.info.name) {
      check_variant_on(registered, false, testing::edge_shapes_in_every_type());
    }
  }
}

TEST_CASE("every variant matches the oracle on every mask and score modifier it declares",
          "[oracle][variants][mask]") {
  for (const RegisteredVariant& registered : Registry::instance().all()) {
    DYNAMIC_SECTION(registered.info.name) {
      check_variant_on(registered, false, testing::in_every_type(testing::masked_edge_shapes()));
    }
  }
}

TEST_CASE("variants that take ragged batches or paged caches match the oracle on them",
          "[oracle][variants][serving]") {
  for (const RegisteredVariant& registered : Registry::instance().all()) {
    DYNAMIC_SECTION(registered.info.name) {
      const Capabilities& caps = registered.info.capabilities;
      if (!caps.ragged && !caps.paged_kv) {
        WARN("SKIPPED " << registered.info.name << ": takes neither ragged nor paged caches");
        continue;
      }
      check_variant_on(registered, false, testing::in_every_type(testing::serving_edge_shapes()));
      if (caps.returns_weights) check_variant_on(registered, true, testing::serving_edge_shapes());
    }
  }
}

TEST_CASE("variants that return weights return correct weights", "[oracle][variants][weights]") {
  for (const RegisteredVariant& registered : Registry::instance().all()) {
    DYNAMIC_SECTION(registered.info.name) {
      if (!registered.info.capabilities.returns_weights) {
        WARN("SKIPPED " << registered.info.name << ": does not return attention weights");
        continue;
      }
      check_variant_on(registered, true, testing::edge_shapes_in_every_type());
      check_variant_on(registered, true, testing::in_every_type(testing::masked_edge_shapes()));
    }
  }
}

}  // namespace
}  // namespace attnbench
