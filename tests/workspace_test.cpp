// What the variants say about their scratch memory is what they take: the harness refuses cases
// by workspace_bytes() and charts the measured peak, so the two must agree, and the chunked
// variant's memory must not grow with the sequence while naive's grows with its square.
#include "harness/variant/workspace.h"

#include <catch2/catch.hpp>
#include <string>

#include "harness/variant/registry.h"
#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

using testing::make_shape;

// The peak a HostWorkspace records while `name` prepares for `shape`.
std::size_t measured_peak(const std::string& name, const Shape& shape) {
  const RegisteredVariant* registered = Registry::instance().find(name);
  REQUIRE(registered != nullptr);
  HostWorkspace workspace;
  auto variant = registered->make();
  variant->prepare(shape, workspace);
  return workspace.peak_bytes();
}

Shape square(int64_t seq) { return make_shape(1, 4, 4, seq, seq, 64, 64, false); }

TEST_CASE("every CPU variant's prepare() takes exactly workspace_bytes()", "[workspace]") {
  const Shape shapes[] = {
      make_shape(1, 1, 1, 1, 1, 16, 16, false),       make_shape(2, 4, 2, 131, 300, 48, 80, true),
      make_shape(1, 2, 2, 150, 23, 13, 13, false),    make_shape(1, 8, 1, 1, 1000, 64, 64, true),
      make_shape(2, 8, 8, 512, 512, 128, 128, false),
  };
  for (const RegisteredVariant& registered : Registry::instance().all()) {
    if (registered.info.device != Device::cpu) continue;
    for (const Shape& shape : shapes) {
      INFO(registered.info.name << " on " << describe(shape));
      auto variant = registered.make();
      HostWorkspace workspace;
      variant->prepare(shape, workspace);
      CHECK(workspace.peak_bytes() == variant->workspace_bytes(shape));
    }
  }
}

TEST_CASE("chunked's workspace does not grow with the sequence, naive's grows with its square",
          "[workspace]") {
  const std::size_t chunked_short = measured_peak("chunked", square(1024));
  const std::size_t chunked_long = measured_peak("chunked", square(4096));
  INFO("chunked: " << chunked_short << " bytes at seq 1024, " << chunked_long << " at 4096");
  CHECK(chunked_long >= chunked_short);
  CHECK(static_cast<double>(chunked_long) / chunked_short < 2.0);

  const std::size_t naive_short = measured_peak("naive", square(1024));
  const std::size_t naive_long = measured_peak("naive", square(4096));
  INFO("naive: " << naive_short << " bytes at seq 1024, " << naive_long << " at 4096");
  CHECK(static_cast<double>(naive_long) / naive_short > 8.0);
}

}  // namespace
}  // namespace attnbench
