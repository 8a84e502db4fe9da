// flash_cpu's amx_bf16 path (both products on matrix tiles): the tile layer's TDPBF16PS against a
// float64 product and, where the CPU has AMX, the hardware against the emulation; the path itself
// through the float64 oracle on the emulated tiles (ATTNBENCH_FLASH_CPU_ISA=amx_bf16_emulated),
// so its packing, tile walk, masks and softmax are tested on any AVX2 host; and AMX, as a
// CPU feature, detected only where it is usable, hidden by ATTNBENCH_CPU_FEATURES and refused by
// name where absent (its detection: simd_isa_test.cpp).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "harness/core/element_types.h"
#include "harness/measure/checked_run.h"
#include "harness/measure/inputs.h"
#include "harness/simd/cpu_features.h"
#include "harness/simd/isa.h"
#include "tests/edge_shapes.h"
#include "tests/flash_cpu_paths.h"
#include "variants/cpu/flash_cpu/isa_choice.h"

namespace attnbench {
namespace {

using testing::cpu_supports;
using testing::emulated_tiles_run_here;
using testing::flash_cpu;
using testing::kIsaVariable;
using testing::make_shape;
using testing::ScopedEnvironment;
using testing::with_mask;

bool built(Isa isa) {
  for (Isa candidate : isas_built())
    if (candidate == isa) return true;
  return false;
}

CpuFeatures avx512_with_bf16() {
  CpuFeatures features;
  features.avx2 = features.fma = features.f16c = true;
  features.avx512f = features.avx512vl = features.avx512bw = features.avx512bf16 = true;
  return features;
}

CpuFeatures with_amx() {
  CpuFeatures features = avx512_with_bf16();
  features.amx_tile = features.amx_bf16 = features.avx512dq = true;
  return features;
}

const auto kBf16Slower = [] { return false; };

TEST_CASE("amx_bf16 needs the tiles, AVX-512 BF16 and DQ, and limits hide it", "[simd][tiles]") {
  CHECK_FALSE(isa_runs_on(Isa::amx_bf16, avx512_with_bf16()));
  CpuFeatures tiles_without_bf16 = with_amx();
  tiles_without_bf16.amx_bf16 = false;
  CHECK_FALSE(isa_runs_on(Isa::amx_bf16, tiles_without_bf16));
  CpuFeatures tiles_without_dq = with_amx();
  tiles_without_dq.avx512dq = false;
  CHECK_FALSE(isa_runs_on(Isa::amx_bf16, tiles_without_dq));
  CHECK(isa_runs_on(Isa::amx_bf16, with_amx()) == built(Isa::amx_bf16));
  CHECK(with_amx().describe() ==
        "avx2 fma f16c avx512f avx512vl avx512bw avx512dq avx512bf16 amx_tile amx_bf16");
  // ATTNBENCH_CPU_FEATURES=avx512_bf16 on an AMX host: no tiles, and the path chooses none.
  if (built(Isa::amx_bf16)) {
    const CpuFeatures limited = limit_to_path("avx512_bf16", with_amx());
    CHECK_FALSE(limited.amx_tile);
    CHECK_FALSE(limited.amx_bf16);
    CHECK(flash_cpu::choose_paths("", limited, kBf16Slower).tiles == flash_cpu::TileBackend::none);
    CHECK(limit_to_path("amx_bf16", with_amx()).amx_bf16);
    CHECK_THROWS_WITH(limit_to_path("amx_bf16", avx512_with_bf16()),
                      Catch::Contains("ATTNBENCH_CPU_FEATURES") && Catch::Contains("amx_bf16"));
  }
  // The widest vector path never counts the tiles.
  CHECK(widest_isa(with_amx()) == (built(Isa::avx512) ? Isa::avx512 : Isa::scalar));
}

TEST_CASE("flash_cpu takes the tiles where AMX is, and refuses them by name where not",
          "[flash_cpu][tiles]") {
  if (!built(Isa::amx_bf16)) {
    WARN("SKIPPED: the amx_bf16 path is not built for this architecture");
    return;
  }
  using flash_cpu::choose_paths;
  using flash_cpu::TileBackend;
  // Automatic: tiles where the CPU has AMX; the vector path as without them.
  const flash_cpu::PathChoice automatic = choose_paths("", with_amx(), kBf16Slower);
  CHECK(automatic.tiles == TileBackend::hardware);
  CHECK(automatic.isa == Isa::avx512);
  CHECK(choose_paths("", avx512_with_bf16(), kBf16Slower).tiles == TileBackend::none);
  // Forced: granted with AMX, refused by name without it.
  CHECK(choose_paths("amx_bf16", with_amx(), kBf16Slower).tiles == TileBackend::hardware);
  CHECK_THROWS_WITH(choose_paths("amx_bf16", avx512_with_bf16(), kBf16Slower),
                    Catch::Contains("ATTNBENCH_FLASH_CPU_ISA") && Catch::Contains("amx_bf16") &&
                        Catch::Contains("amx_tile"));
  // The emulation (emulated tiles, emulated AVX-512) needs only AVX2, and is never chosen unasked.
  CHECK(choose_paths("amx_bf16_emulated", avx512_with_bf16(), kBf16Slower).tiles ==
        TileBackend::emulated);
  CpuFeatures avx2_only;
  avx2_only.avx2 = avx2_only.fma = avx2_only.f16c = true;
  const flash_cpu::PathChoice on_avx2 = choose_paths("amx_bf16_emulated", avx2_only, kBf16Slower);
  CHECK(on_avx2.tiles == TileBackend::emulated);
  CHECK(on_avx2.isa == Isa::avx2);
  CHECK_THROWS_WITH(choose_paths("amx_bf16_emulated", CpuFeatures{}, kBf16Slower),
                    Catch::Contains("amx_bf16_emulated") && Catch::Contains("avx2"));
  // Likewise the avx512_bf16 path on emulated AVX-512: its kernels and name, no tiles.
  const flash_cpu::PathChoice vectors =
      choose_paths("avx512_bf16_emulated", avx2_only, kBf16Slower);
  CHECK(vectors.emulated_vectors);
  CHECK(vectors.isa == Isa::avx512_bf16);
  CHECK(vectors.tiles == TileBackend::none);
  CHECK(flash_cpu::vector_path_name(vectors) == "avx512_bf16_emulated");
  CHECK_FALSE(choose_paths("avx512_bf16", avx512_with_bf16(), kBf16Slower).emulated_vectors);
  CHECK_THROWS_WITH(choose_paths("avx512_bf16_emulated", CpuFeatures{}, kBf16Slower),
                    Catch::Contains("avx512_bf16_emulated") && Catch::Contains("avx2"));
  // On this CPU: forcing the hardware tiles fails by name unless AMX is here.
  if (!CpuFeatures::of_this_cpu().amx_bf16) {
    const ScopedEnvironment isa(kIsaVariable, "amx_bf16");
    auto variant = flash_cpu().make();
    HostWorkspace workspace;
    Shape shape = make_shape(1, 1, 1, 32, 32, 64, 64, false);
    shape.dtype = DType::bf16;
    CHECK_THROWS_WITH(variant->prepare(shape, workspace), Catch::Contains("amx_bf16"));
  }
}

// Random bf16 values near 1 in magnitude, and some exact small integers: products and sums that
// fp32 holds exactly and ones it rounds.
std::vector<uint16_t> random_bf16(std::mt19937& draw, int count) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> values(static_cast<std::size_t>(count));
  for (auto& value : values) value = to_bf16_bits(normal(draw));
  return values;
}

TEST_CASE("emulated TDPBF16PS is the pairwise bf16 product summed in fp32", "[simd][tiles]") {
  if (!emulated_tiles_run_here()) {
    WARN("SKIPPED the emulated tiles: their kernels need AVX2, which this CPU lacks");
    return;
  }
  const flash_cpu::TileKernels emulated = flash_cpu::tile_kernels(flash_cpu::TileBackend::emulated);
  std::mt19937 draw(7);
  for (int trial = 0; trial < 20; ++trial) {
    const std::vector<uint16_t> a = random_bf16(draw, 16 * 32);  // [16 rows][16 pairs]
    const std::vector<uint16_t> b = random_bf16(draw, 16 * 32);  // [16 pairs][16 columns][2]
    std::vector<float> c(16 * 16);
    std::normal_distribution<float> normal(0.0f, 4.0f);
    for (float& value : c) value = normal(draw);
    const std::vector<float> c_before = c;
    emulated.tile_product(a.data(), b.data(), c.data());
    double worst = 0;
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 16; ++n) {
        double exact = c_before[static_cast<std::size_t>(m * 16 + n)];
        double magnitude = std::fabs(exact);
        for (int k = 0; k < 16; ++k)
          for (int t = 0; t < 2; ++t) {
            const double product = static_cast<double>(from_bf16_bits(
                                       a[static_cast<std::size_t>(m * 32 + 2 * k + t)])) *
                                   from_bf16_bits(b[static_cast<std::size_t>(k * 32 + 2 * n + t)]);
            exact += product;
            magnitude += std::fabs(product);
          }
        // 32 roundings of fp32 sums: each within half an ulp of the running magnitude.
        const double error = std::fabs(c[static_cast<std::size_t>(m * 16 + n)] - exact);
        worst = std::max(worst, error / (magnitude * 32 * 0x1p-24));
      }
    INFO("trial " << trial << ": worst error / (32 half-ulps of the magnitude) " << worst);
    CHECK(worst <= 1.0);
  }
  // Exact where fp32 is: small integers, and C's start kept.
  std::vector<uint16_t> a(16 * 32), b(16 * 32);
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = to_bf16_bits(static_cast<float>(static_cast<int>(i % 7) - 3));
    b[i] = to_bf16_bits(static_cast<float>(static_cast<int>(i % 5) - 2));
  }
  std::vector<float> c(16 * 16, 1.0f);
  emulated.tile_product(a.data(), b.data(), c.data());
  for (std::size_t m = 0; m < 16; ++m)
    for (std::size_t n = 0; n < 16; ++n) {
      double exact = 1.0;
      for (std::size_t k = 0; k < 16; ++k)
        for (std::size_t t = 0; t < 2; ++t)
          exact += static_cast<double>(from_bf16_bits(a[m * 32 + 2 * k + t])) *
                   from_bf16_bits(b[k * 32 + 2 * n + t]);
      CHECK(c[m * 16 + n] == static_cast<float>(exact));
    }
}

TEST_CASE("AMX's TDPBF16PS matches the emulation on random tiles", "[simd][tiles]") {
  if (!CpuFeatures::of_this_cpu().amx_bf16) {
    const CpuFeatures& detected = CpuFeatures::detected();
    WARN("SKIPPED the AMX tiles against their emulation: this CPU has no usable amx_bf16"
         << (detected.amx_unusable.empty() ? std::string() : " (" + detected.amx_unusable + ")"));
    return;
  }
  const flash_cpu::TileKernels hardware = flash_cpu::tile_kernels(flash_cpu::TileBackend::hardware);
  const flash_cpu::TileKernels emulated = flash_cpu::tile_kernels(flash_cpu::TileBackend::emulated);
  std::mt19937 draw(11);
  for (int trial = 0; trial < 50; ++trial) {
    const std::vector<uint16_t> a = random_bf16(draw, 16 * 32);
    const std::vector<uint16_t> b = random_bf16(draw, 16 * 32);
    std::vector<float> on_tiles(16 * 16), emulation(16 * 16);
    std::normal_distribution<float> normal(0.0f, 4.0f);
    for (std::size_t i = 0; i < on_tiles.size(); ++i) on_tiles[i] = emulation[i] = normal(draw);
    hardware.tile_product(a.data(), b.data(), on_tiles.data());
    emulated.tile_product(a.data(), b.data(), emulation.data());
    for (std::size_t i = 0; i < on_tiles.size(); ++i) {
      // The hardware may round a pair's sum once where the emulation rounds twice.
      INFO("trial " << trial << " element " << i);
      CHECK(std::fabs(on_tiles[i] - emulation[i]) <= 1e-5f * (1.0f + std::fabs(emulation[i])) * 32);
    }
  }
}

// Every shape above on `tiles_name`'s tiles, each input distribution, through the float64 oracle.
void check_tile_path(const std::string& tiles_name, const std::string& code_path) {
  const ScopedEnvironment isa(kIsaVariable, tiles_name);
  auto executor = make_executor(Device::cpu);
  for (const auto& [shape_name, shape] : testing::tile_shapes()) {
    INFO(shape_name << ": " << validate(shape));
    REQUIRE(validate(shape).empty());
    auto variant = flash_cpu().make();
    executor->workspace().release_all();
    executor->workspace().reset_peak();
    variant->prepare(shape, executor->workspace());
    CHECK(variant->code_path() == code_path);
    CHECK(executor->workspace().peak_bytes() == variant->workspace_bytes(shape));
    const bool large = shape.seq_q * shape.seq_kv > 200'000;
    for (Distribution distribution : all_distributions()) {
      if (large && distribution != Distribution::normal) continue;  // the emulation is slow
      const HostTensors inputs = make_inputs(shape, distribution, 4321);
      const OracleReport report =
          run_checked(*variant, *executor, inputs, default_scale(shape), false, OracleOptions{});
      INFO(fmt::format("flash_cpu[{}] on {} ({}), {} inputs: rel L2 {:.3g}, max abs {:.3g}",
                       tiles_name, shape_name, describe(shape), to_string(distribution),
                       report.rel_l2_err, report.max_abs_err));
      INFO(report.failure);
      CHECK(report.passed);
    }
  }
}

TEST_CASE("flash_cpu on emulated tiles passes the oracle", "[flash_cpu][tiles][oracle]") {
  if (!emulated_tiles_run_here()) {
    WARN("SKIPPED flash_cpu on emulated tiles: they need an x86-64 build and AVX2 on this CPU");
    return;
  }
  check_tile_path("amx_bf16_emulated", "amx_bf16_emulated+tiles");
}

// bf16 shapes, masks and modifiers drawn at random (replayable: the seed is in the message), for
// the tile walk's bounds: ragged key blocks, query blocks, d padding, 32 x 32 skipping.
Shape random_tile_shape(std::mt19937_64& draw) {
  auto pick = [&draw](int64_t low, int64_t high) {
    return std::uniform_int_distribution<int64_t>(low, high)(draw);
  };
  const int64_t kv_heads = pick(1, 2);
  const int64_t seq_kv = pick(1, 300);
  Shape s = make_shape(pick(1, 2), kv_heads * pick(1, 3), kv_heads, pick(17, 300), seq_kv,
                       pick(1, 140), pick(1, 140), false);
  switch (pick(0, 4)) {
    case 0: s.set_mask(MaskSpec::causal()); break;
    case 1: s.set_mask(MaskSpec::window(pick(0, 150))); break;
    case 2: s.set_mask(MaskSpec::prefix(pick(0, seq_kv))); break;
    case 3: {
      s.seq_q = s.seq_kv = std::max<int64_t>(s.seq_kv, 17);
      s.set_mask(MaskSpec::documents(
          draw_document_lengths(s.seq_q, pick(1, std::min<int64_t>(s.seq_q, 10)), draw())));
      break;
    }
    default: break;
  }
  s.alibi = pick(0, 1) == 1;
  s.softcap = pick(0, 2) == 0 ? 0.0 : static_cast<double>(pick(1, 50));
  s.dtype = DType::bf16;
  s.layout = all_layouts()[static_cast<std::size_t>(pick(0, 1))];
  return s;
}

TEST_CASE("flash_cpu on emulated tiles matches the oracle on random shapes and masks",
          "[flash_cpu][tiles][oracle][mask]") {
  if (!emulated_tiles_run_here()) {
    WARN("SKIPPED flash_cpu on emulated tiles: they need an x86-64 build and AVX2 on this CPU");
    return;
  }
  const ScopedEnvironment isa(kIsaVariable, "amx_bf16_emulated");
  auto executor = make_executor(Device::cpu);
  int checked = 0;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    std::mt19937_64 draw(seed);
    const Shape shape = random_tile_shape(draw);
    if (!validate(shape).empty()) continue;  // e.g. a window that leaves a query no key
    auto variant = flash_cpu().make();
    executor->workspace().release_all();
    variant->prepare(shape, executor->workspace());
    CHECK(variant->code_path() == "amx_bf16_emulated+tiles");
    const HostTensors inputs = make_inputs(shape, Distribution::normal, seed);
    const OracleReport report =
        run_checked(*variant, *executor, inputs, default_scale(shape), false, OracleOptions{});
    INFO(fmt::format("flash_cpu[amx_bf16_emulated] on {} (seed {}): rel L2 {:.3g}, max abs {:.3g}",
                     describe(shape), seed, report.rel_l2_err, report.max_abs_err));
    INFO(report.failure);
    CHECK(report.passed);
    ++checked;
  }
  CHECK(checked >= 20);
}

TEST_CASE("flash_cpu on AMX tiles passes the oracle", "[flash_cpu][tiles][oracle]") {
  if (!cpu_supports("amx_bf16")) {
    WARN("SKIPPED flash_cpu on AMX tiles: this CPU has no usable amx_bf16");
    return;
  }
  check_tile_path("amx_bf16", "amx_bf16+tiles");
}

TEST_CASE("flash_cpu on tiles keeps a row's largest weight when scores pass 2^31",
          "[flash_cpu][tiles][oracle]") {
  if (!emulated_tiles_run_here()) {
    WARN("SKIPPED: the emulated tiles need an x86-64 build and AVX2 on this CPU");
    return;
  }
  // Scale 1e8 on normal inputs: scores of about 1e9 in base 2, whose products round by up to
  // 128. The fused softmax once took exp2 of that rounding error for the largest score: inf (a
  // refused NaN output) or a lost weight (a wrong O that passed as finite).
  std::vector<std::string> paths = {"amx_bf16_emulated"};
  if (cpu_supports("amx_bf16")) paths.push_back("amx_bf16");
  Shape shape = testing::make_shape(1, 2, 2, 40, 40, 64, 64, false);
  shape.dtype = DType::bf16;
  auto executor = make_executor(Device::cpu);
  for (const std::string& path : paths) {
    const ScopedEnvironment isa(kIsaVariable, path);
    auto variant = flash_cpu().make();
    executor->workspace().release_all();
    variant->prepare(shape, executor->workspace());
    REQUIRE(variant->code_path() == path + "+tiles");
    for (uint64_t seed = 1; seed <= 12; ++seed) {
      const HostTensors inputs = make_inputs(shape, Distribution::normal, seed);
      const OracleReport report =
          run_checked(*variant, *executor, inputs, 1e8, false, OracleOptions{});
      INFO(path << " seed " << seed << ": " << report.failure);
      CHECK(report.passed);
    }
  }
}

TEST_CASE("the tile path leaves the cases it does not take to the vector paths",
          "[flash_cpu][tiles]") {
  if (!emulated_tiles_run_here()) {
    WARN("SKIPPED: the emulated tiles need an x86-64 build and AVX2 on this CPU");
    return;
  }
  const ScopedEnvironment isa(kIsaVariable, "amx_bf16_emulated");
  HostWorkspace workspace;
  Shape shape = make_shape(1, 2, 2, 64, 64, 64, 64, false);
  const auto path_of = [&workspace](const Shape& s) {
    auto variant = flash_cpu().make();
    workspace.release_all();
    variant->prepare(s, workspace);
    return variant->code_path();
  };
  shape.dtype = DType::bf16;
  CHECK(path_of(shape) == "amx_bf16_emulated+tiles");
  Shape fp32 = shape;
  fp32.dtype = DType::fp32;
  CHECK(path_of(fp32).find("tiles") == std::string::npos);
  Shape decode = shape;
  decode.seq_q = 16;
  CHECK(path_of(decode).find("decode") != std::string::npos);
  Shape wide = shape;
  wide.d_k = 288;
  CHECK(path_of(wide).find("tiles") == std::string::npos);
  Shape training = shape;  // the backward runs on tiles too (flash_cpu_backward_test.cpp)
  training.pass = Pass::fwd_bwd;
  CHECK(path_of(training) == "amx_bf16_emulated+tiles");
  training.dtype = DType::fp16;
  CHECK(path_of(training).find("tiles") == std::string::npos);
}

}  // namespace
}  // namespace attnbench
