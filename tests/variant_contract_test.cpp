// The contract every variant is held to, checked for every registered variant, and the rules
// by which a variant that declares no support for a feature is skipped.
#include <catch2/catch.hpp>
#include <cctype>
#include <set>

#include "harness/measure/executor.h"
#include "harness/variant/registry.h"
#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

using testing::make_shape;

TEST_CASE("every variant has a stable lower-case name and a one-line summary", "[contract]") {
  REQUIRE(Registry::instance().all().size() >= 4);
  for (const RegisteredVariant& variant : Registry::instance().all()) {
    const VariantInfo& info = variant.info;
    INFO(info.name);
    CHECK(!info.name.empty());
    for (char c : info.name)
      CHECK((std::islower(static_cast<unsigned char>(c)) ||
             std::isdigit(static_cast<unsigned char>(c)) || c == '_'));
    CHECK(!info.summary.empty());
    CHECK(info.summary.find('\n') == std::string::npos);
    CHECK(variant.make()->info().name == info.name);
  }
}

TEST_CASE("a variant's workspace estimate is what prepare() takes", "[contract]") {
  for (const RegisteredVariant& variant : Registry::instance().all()) {
    std::string unavailable;
    if (!device_available(variant.info.device, &unavailable)) {
      WARN("SKIPPED " << variant.info.name << ": " << unavailable);
      continue;
    }
    auto executor = make_executor(variant.info.device);
    for (const auto& [name, shape] : testing::edge_shapes()) {
      if (!unsupported_reason(variant.info, shape, false).empty()) continue;
      executor->workspace().release_all();
      executor->workspace().reset_peak();
      auto instance = variant.make();
      instance->prepare(shape, executor->workspace());
      INFO(variant.info.name << " on " << name);
      CHECK(executor->workspace().peak_bytes() == instance->workspace_bytes(shape));
    }
  }
}

// The runner skips a case a variant does not take before prepare(); a variant called directly
// must refuse it too (refuse_unsupported), before it allocates or touches a device (so the GPU
// variants are checked here without one), rather than run a kernel that ignores the mask,
// modifier, dtype, layout or cache.
TEST_CASE("every variant's prepare() refuses a shape it does not take, naming why", "[contract]") {
  std::vector<Shape> candidates;
  for (const auto& [name, base] : testing::edge_shapes()) {
    const auto add = [&](auto change) {
      Shape shape = base;
      change(shape);
      if (validate(shape).empty()) candidates.push_back(shape);
    };
    add([](Shape& shape) { shape.set_mask(MaskSpec::window(3)); });
    add([](Shape& shape) { shape.alibi = true; });
    add([](Shape& shape) { shape.dtype = DType::bf16; });
    add([](Shape& shape) { shape.layout = Layout::bshd; });
    add([](Shape& shape) { shape.kv_cache = KvCacheSpec::paged(16); });
    add([](Shape& shape) { shape.kv_dtype = KvDType::int8; });
    add([](Shape& shape) { shape.pass = Pass::bwd; });
  }
  auto host = make_executor(Device::cpu);
  std::set<std::string> refusing;
  for (const RegisteredVariant& variant : Registry::instance().all()) {
    for (const Shape& shape : candidates) {
      const std::string reason = unsupported_reason(variant.info, shape, false);
      if (reason.empty()) continue;
      INFO(variant.info.name << ": " << reason);
      host->workspace().release_all();
      auto instance = variant.make();
      CHECK_THROWS_WITH(instance->prepare(shape, host->workspace()), reason);
      refusing.insert(variant.info.name);
    }
  }
  // blocked takes fp32 bhsd alone, so the candidates reach at least it.
  CHECK(refusing.count("blocked") == 1);
}

TEST_CASE("unsupported features are named in the skip reason", "[contract]") {
  VariantInfo info;
  info.name = "limited";
  info.capabilities.max_d = 128;
  const Shape plain = make_shape(1, 4, 4, 8, 8, 64, 64, false);
  CHECK(unsupported_reason(info, plain, false).empty());
  CHECK_THAT(unsupported_reason(info, make_shape(1, 4, 4, 8, 8, 64, 64, true), false),
             Catch::Contains("causal"));
  CHECK_THAT(unsupported_reason(info, make_shape(1, 4, 2, 8, 8, 64, 64, false), false),
             Catch::Contains("GQA"));
  CHECK_THAT(unsupported_reason(info, plain, true), Catch::Contains("weights"));
  CHECK_THAT(unsupported_reason(info, make_shape(1, 4, 4, 8, 8, 256, 64, false), false),
             Catch::Contains("up to 128"));
  info.capabilities.head_dims = {64, 128};
  CHECK(unsupported_reason(info, plain, false).empty());
  CHECK(unsupported_reason(info, make_shape(1, 4, 4, 8, 8, 128, 64, false), false).empty());
  CHECK(unsupported_reason(info, make_shape(1, 4, 4, 8, 8, 48, 80, false), false) ==
        "limited takes d_k and d_v in {64, 128} only (got 48 and 80)");
  CHECK_THAT(unsupported_reason(info, make_shape(1, 4, 4, 8, 8, 64, 32, false), false),
             Catch::Contains("{64, 128}"));
}

TEST_CASE(
    "a variant takes none and causal by default, and other masks and modifiers only when "
    "declared",
    "[contract][mask]") {
  VariantInfo info;
  info.name = "plain";
  info.capabilities.causal = true;
  const Shape base = make_shape(1, 4, 4, 8, 8, 64, 64, false);
  CHECK(unsupported_reason(info, testing::with_mask(base, MaskSpec::causal()), false).empty());
  CHECK_THAT(unsupported_reason(info, testing::with_mask(base, MaskSpec::window(2)), false),
             Catch::Contains("plain does not support the window mask"));
  CHECK_THAT(unsupported_reason(info, testing::with_mask(base, MaskSpec::prefix(2)), false),
             Catch::Contains("prefix mask"));
  CHECK_THAT(unsupported_reason(info, testing::with_mask(base, MaskSpec::documents({3, 5})), false),
             Catch::Contains("documents mask"));
  CHECK_THAT(unsupported_reason(info, testing::with_mask(base, MaskSpec::none(), true), false),
             Catch::Contains("ALiBi"));
  CHECK_THAT(unsupported_reason(info, testing::with_mask(base, MaskSpec::none(), false, 30), false),
             Catch::Contains("soft-capping"));
  info.capabilities.masks = {MaskKind::window};
  info.capabilities.alibi = true;
  CHECK(
      unsupported_reason(info, testing::with_mask(base, MaskSpec::window(2), true), false).empty());
  CHECK_FALSE(
      unsupported_reason(info, testing::with_mask(base, MaskSpec::prefix(2)), false).empty());
}

TEST_CASE("naive takes every mask and both score modifiers", "[contract][mask]") {
  const RegisteredVariant* naive = Registry::instance().find("naive");
  REQUIRE(naive != nullptr);
  const Capabilities& caps = naive->info.capabilities;
  for (MaskKind kind : all_mask_kinds()) CHECK(takes_mask(caps, kind));
  CHECK(caps.alibi);
  CHECK(caps.softcap);
}

TEST_CASE("shapes are validated with a reason", "[contract]") {
  CHECK(validate(make_shape(1, 8, 2, 16, 32, 64, 32, true)).empty());
  CHECK_THAT(validate(make_shape(0, 8, 8, 16, 16, 64, 64, false)),
             Catch::Contains("batch must be positive"));
  CHECK_THAT(validate(make_shape(1, 8, 3, 16, 16, 64, 64, false)),
             Catch::Contains("multiple of kv_heads"));
  CHECK_THAT(validate(make_shape(1, 8, 8, 32, 16, 64, 64, true)),
             Catch::Contains("seq_q <= seq_kv"));
}

}  // namespace
}  // namespace attnbench

namespace attnbench {
namespace {

class NamedVariant final : public Variant {
 public:
  VariantInfo info() const override {
    VariantInfo info;
    info.name = "twice";
    return info;
  }
  std::size_t workspace_bytes(const Shape&) const override { return 0; }
  void prepare(const Shape&, Workspace&) override {}
  void run(const Problem&) override {}
};

TEST_CASE("a name registered twice is reported by check_names, not fatal", "[registry]") {
  Registry registry;
  registry.add([] { return std::make_unique<NamedVariant>(); });
  CHECK_NOTHROW(registry.check_names());
  registry.add([] { return std::make_unique<NamedVariant>(); });
  CHECK(registry.names() == std::vector<std::string>{"twice"});
  CHECK_THROWS_WITH(registry.check_names(), Catch::Contains("twice"));
  CHECK_NOTHROW(Registry::instance().check_names());
}

}  // namespace
}  // namespace attnbench
