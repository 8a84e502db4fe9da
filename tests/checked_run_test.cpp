// A variant that fails becomes a failed case with its message; a lost device stops the sweep.
#include "harness/measure/checked_run.h"

#include <catch2/catch.hpp>

#include "harness/measure/cpu_executor.h"
#include "harness/measure/inputs.h"
#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

// Not registered: it exists only to fail in the ways a real variant can.
class FailingVariant final : public Variant {
 public:
  enum class Failure { throws, loses_device, writes_nothing };
  explicit FailingVariant(Failure failure) : failure_(failure) {}
  VariantInfo info() const override { return {"failing", Device::cpu, "fails on purpose", {}}; }
  std::size_t workspace_bytes(const Shape&) const override { return 0; }
  void prepare(const Shape&, Workspace&) override {}
  void run(const Problem&) override {
    if (failure_ == Failure::throws)
      throw std::runtime_error("kernel launch failed: invalid argument");
    if (failure_ == Failure::loses_device)
      throw DeviceLostError("an illegal memory access was encountered");
  }

 private:
  Failure failure_;
};

const Shape shape = testing::make_shape(1, 2, 2, 8, 8, 16, 16, false);

OracleReport run_failing(FailingVariant::Failure failure) {
  CpuExecutor executor;
  FailingVariant variant(failure);
  const HostTensors inputs = make_inputs(shape, Distribution::normal, 1);
  return run_checked(variant, executor, inputs, default_scale(shape), false, OracleOptions{});
}

TEST_CASE("a variant that throws fails its case with the message", "[checked_run]") {
  const OracleReport report = run_failing(FailingVariant::Failure::throws);
  CHECK_FALSE(report.passed);
  CHECK(report.failure == "run failed: variant failing: kernel launch failed: invalid argument");
}

TEST_CASE("a lost device is rethrown so the sweep can stop cleanly", "[checked_run]") {
  CHECK_THROWS_AS(run_failing(FailingVariant::Failure::loses_device), DeviceLostError);
}

TEST_CASE("a variant that writes nothing fails on the NaN poison", "[checked_run]") {
  const OracleReport report = run_failing(FailingVariant::Failure::writes_nothing);
  CHECK_FALSE(report.passed);
  CHECK_THAT(report.failure, Catch::Contains("NaN (unwritten"));
}

}  // namespace
}  // namespace attnbench
