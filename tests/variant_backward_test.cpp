// Every registered variant that declares a backward against the backward oracle: the edge shapes
// and the masked ones, in every dtype and layout it takes, for the passes bwd and fwd_bwd. A new
// backward (flash_cpu's, a CUDA one) is tested here with no edit to this file, as the forward is
// in variant_oracle_test.cpp.
#include <catch2/catch.hpp>

#include "harness/variant/registry.h"
#include "tests/edge_shapes.h"
#include "tests/oracle_check.h"

namespace attnbench {
namespace {

// Each shape in the passes bwd and fwd_bwd, on two distributions: ordinary rows, and rows one key
// dominates (dS nearly cancels there); fixed seeds.
void check_backward_on(const RegisteredVariant& registered,
                       const std::vector<testing::NamedShape>& shapes) {
  std::vector<testing::NamedShape> passes;
  for (const auto& [shape_name, fwd_shape] : shapes) {
    for (Pass pass : {Pass::bwd, Pass::fwd_bwd}) {
      Shape shape = fwd_shape;
      shape.pass = pass;
      passes.push_back({shape_name, shape});
    }
  }
  testing::check_against_oracle(
      registered, passes, false, {Distribution::normal, Distribution::dominant_key},
      [](Distribution distribution) { return 1234 + static_cast<uint64_t>(distribution); });
}

TEST_CASE("every variant with a backward matches the backward oracle on every edge shape",
          "[oracle][variants][backward]") {
  for (const RegisteredVariant& registered : Registry::instance().all()) {
    if (!registered.info.capabilities.backward) continue;
    DYNAMIC_SECTION(registered.info.name) {
      check_backward_on(registered, testing::edge_shapes_in_every_type());
    }
  }
}

TEST_CASE("every variant with a backward matches the backward oracle on every mask and modifier",
          "[oracle][variants][backward][mask]") {
  for (const RegisteredVariant& registered : Registry::instance().all()) {
    if (!registered.info.capabilities.backward) continue;
    DYNAMIC_SECTION(registered.info.name) {
      check_backward_on(registered, testing::in_every_type(testing::masked_edge_shapes()));
    }
  }
}

TEST_CASE("a backward that leaves a gradient unwritten fails the oracle", "[oracle][backward]") {
  // naive's backward, then dK's first element of head 0 left as the executor poisoned it.
  const RegisteredVariant* naive = Registry::instance().find("naive");
  REQUIRE(naive != nullptr);
  class SkipsOneKey final : public Variant {
   public:
    explicit SkipsOneKey(std::unique_ptr<Variant> inner) : inner_(std::move(inner)) {}
    VariantInfo info() const override { return inner_->info(); }
    std::size_t workspace_bytes(const Shape& s) const override {
      return inner_->workspace_bytes(s);
    }
    void prepare(const Shape& s, Workspace& w) override { inner_->prepare(s, w); }
    void run(const Problem& p) override { inner_->run(p); }
    void run_backward(const BackwardProblem& p) override {
      const float kept = *p.dk.row<float>(0, 0, 0);
      inner_->run_backward(p);
      *p.dk.row<float>(0, 0, 0) = kept;
    }

   private:
    std::unique_ptr<Variant> inner_;
  };
  Shape shape = testing::make_shape(1, 2, 1, 9, 12, 8, 8, true);
  shape.pass = Pass::bwd;
  SkipsOneKey variant(naive->make());
  auto executor = make_executor(Device::cpu);
  variant.prepare(shape, executor->workspace());
  const HostTensors inputs = make_inputs(shape, Distribution::normal, 5);
  const OracleReport report =
      run_checked(variant, *executor, inputs, default_scale(shape), false, OracleOptions{});
  CHECK_FALSE(report.passed);
  CHECK(report.failure.find("dK is NaN") == 0);
}

}  // namespace
}  // namespace attnbench
