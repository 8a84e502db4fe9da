// flash_cpu: its workspace stays O(d) per thread whatever the sequence length, and every ISA
// copy of its kernels this CPU can run (chosen with ATTNBENCH_FLASH_CPU_ISA) passes the oracle
// in every dtype and layout, the vdpbf16ps kernels included where the CPU has AVX512_BF16, under
// masks that skip blocks and sub-tiles and with the score modifiers.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/measure/checked_run.h"
#include "harness/measure/inputs.h"
#include "harness/simd/isa.h"
#include "harness/variant/registry.h"
#include "tests/edge_shapes.h"
#include "tests/flash_cpu_paths.h"

namespace attnbench {
namespace {

using testing::cpu_supports;
using testing::flash_cpu;
using testing::flash_cpu_through_oracle;
using testing::isa_names_built;
using testing::kIsaVariable;
using testing::make_shape;
using testing::ScopedEnvironment;
using testing::with_mask;

TEST_CASE("flash_cpu workspace does not grow with seq_kv^2", "[flash_cpu][workspace]") {
  const Shape short_shape = make_shape(1, 8, 8, 1024, 1024, 64, 64, false);
  const Shape long_shape = make_shape(1, 8, 8, 8192, 8192, 64, 64, false);
  auto variant = flash_cpu().make();

  const std::size_t declared_short = variant->workspace_bytes(short_shape);
  const std::size_t declared_long = variant->workspace_bytes(long_shape);
  INFO("declared " << declared_short << " -> " << declared_long << " bytes");
  // 8x the sequence is 64x the scores; at most linear growth is allowed, and none is expected.
  CHECK(declared_long < 8 * declared_short);

  std::size_t peaks[2];
  const Shape* shapes[2] = {&short_shape, &long_shape};
  for (int i = 0; i < 2; ++i) {
    HostWorkspace workspace;
    variant->prepare(*shapes[i], workspace);
    peaks[i] = workspace.peak_bytes();
    CHECK(peaks[i] == variant->workspace_bytes(*shapes[i]));
  }
  INFO("measured peak " << peaks[0] << " -> " << peaks[1] << " bytes");
  CHECK(peaks[1] < 8 * peaks[0]);
}

TEST_CASE("flash_cpu records the code path it chose", "[flash_cpu]") {
  // 32 queries: the forward's path (16 or fewer take the decode path, flash_cpu_decode_test.cpp).
  Shape shape = make_shape(1, 1, 1, 32, 32, 16, 16, false);
  shape.dtype = DType::bf16;
  HostWorkspace workspace;
  {
    const ScopedEnvironment isa(kIsaVariable, "scalar");
    auto variant = flash_cpu().make();
    variant->prepare(shape, workspace);
    CHECK(variant->code_path() == "scalar+widened_bf16");
  }
  if (cpu_supports("avx512_bf16")) {
    const ScopedEnvironment isa(kIsaVariable, "avx512_bf16");
    auto variant = flash_cpu().make();
    variant->prepare(shape, workspace);
    CHECK(variant->code_path() == "avx512_bf16+vdpbf16ps");
  } else {
    WARN("SKIPPED the vdpbf16ps code path: this CPU lacks AVX512_BF16");
  }
  if (cpu_supports("avx512_bf16_emulated")) {
    const ScopedEnvironment isa(kIsaVariable, "avx512_bf16_emulated");
    auto variant = flash_cpu().make();
    variant->prepare(shape, workspace);
    CHECK(variant->code_path() == "avx512_bf16_emulated+vdpbf16ps");
  }
}

TEST_CASE("flash_cpu rejects an unknown ATTNBENCH_FLASH_CPU_ISA", "[flash_cpu]") {
  const ScopedEnvironment isa(kIsaVariable, "sse1");
  auto variant = flash_cpu().make();
  HostWorkspace workspace;
  CHECK_THROWS(variant->prepare(make_shape(1, 1, 1, 8, 8, 16, 16, false), workspace));
}

TEST_CASE("every flash_cpu ISA path this CPU supports passes the oracle", "[flash_cpu][oracle]") {
  // Odd sizes on purpose: tails in every blocked dimension, GQA, d_k != d_v, d past 256.
  const std::vector<testing::NamedShape> shapes = {
      {"GQA 3/1, odd d_k/d_v", make_shape(1, 3, 1, 97, 203, 13, 21, false)},
      {"causal GQA 4/2, tails", make_shape(2, 4, 2, 150, 151, 40, 24, true)},
      {"causal seq_q < seq_kv, d 257/255", make_shape(1, 2, 1, 33, 130, 257, 255, true)},
      {"seq_q > seq_kv, d 8", make_shape(1, 2, 2, 200, 9, 8, 8, false)},
      {"d 256, several key blocks", make_shape(1, 1, 1, 70, 300, 256, 256, false)},
      // Masks across many key blocks: skipped blocks, skipped sub-tiles inside partial blocks,
      // row groups whose keys start past the block's first key, and the modifiers.
      {"window:50, several blocks",
       with_mask(make_shape(1, 2, 1, 300, 300, 40, 40, false), MaskSpec::window(50))},
      {"window:7, seq_q < seq_kv",
       with_mask(make_shape(1, 2, 2, 130, 400, 64, 64, false), MaskSpec::window(7))},
      {"documents 1,150,7,96,79", with_mask(make_shape(1, 2, 2, 333, 333, 32, 32, false),
                                            MaskSpec::documents({1, 150, 7, 96, 79}))},
      {"prefix:100 alibi softcap:20",
       with_mask(make_shape(1, 3, 3, 250, 250, 24, 24, false), MaskSpec::prefix(100), true, 20)},
  };
  auto executor = make_executor(Device::cpu);
  // Every dtype and layout too: bf16 on avx512_bf16 is the vdpbf16ps path (d_k even), the rest
  // widen to fp32 on load.
  const std::vector<testing::NamedShape> typed_shapes = [&shapes] {
    std::vector<testing::NamedShape> typed;
    for (DType dtype : all_dtypes())
      for (Layout layout : all_layouts())
        for (testing::NamedShape named : shapes) {
          named.shape.dtype = dtype;
          named.shape.layout = layout;
          named.name += std::string(", ") + to_string(dtype) + " " + to_string(layout);
          typed.push_back(std::move(named));
        }
    typed.push_back({"bf16 pairs: d_k 2, 1 key", make_shape(1, 1, 1, 3, 1, 2, 17, false)});
    typed.back().shape.dtype = DType::bf16;
    return typed;
  }();
  for (const std::string& isa_name : isa_names_built()) {
    const ScopedEnvironment isa(kIsaVariable, isa_name);
    if (!cpu_supports(isa_name)) {
      auto variant = flash_cpu().make();
      CHECK_THROWS(variant->prepare(shapes.front().shape, executor->workspace()));
      WARN("SKIPPED flash_cpu " << isa_name << ": this CPU does not support it");
      continue;
    }
    for (const auto& [shape_name, shape] : typed_shapes) {
      auto variant = flash_cpu().make();
      executor->workspace().release_all();
      variant->prepare(shape, executor->workspace());
      for (Distribution distribution : all_distributions()) {
        const uint64_t seed = 1234;
        const HostTensors inputs = make_inputs(shape, distribution, seed);
        const OracleReport report =
            run_checked(*variant, *executor, inputs, default_scale(shape), false, OracleOptions{});
        INFO(fmt::format("flash_cpu[{}] on {} ({}), {} inputs: rel L2 {:.3g}, max abs {:.3g}",
                         isa_name, shape_name, describe(shape), to_string(distribution),
                         report.rel_l2_err, report.max_abs_err));
        INFO(report.failure);
        CHECK(report.passed);
      }
    }
  }
}

// Masks, modifiers and sizes drawn at random (replayable: the seed is in the failure message):
// shapes nobody picked, for the block, sub-tile and row-group bounds the masks set.
Shape random_masked_shape(std::mt19937_64& draw) {
  auto pick = [&draw](int64_t low, int64_t high) {
    return std::uniform_int_distribution<int64_t>(low, high)(draw);
  };
  const int64_t kv_heads = pick(1, 2);
  const int64_t seq_kv = pick(1, 420);
  Shape s = make_shape(pick(1, 2), kv_heads * pick(1, 3), kv_heads, pick(1, 420), seq_kv,
                       pick(1, 80), pick(1, 80), false);
  switch (pick(0, 4)) {
    case 0: s.set_mask(MaskSpec::causal()); break;
    case 1: s.set_mask(MaskSpec::window(pick(0, 200))); break;
    case 2: s.set_mask(MaskSpec::prefix(pick(0, seq_kv))); break;
    case 3: {
      s.seq_q = s.seq_kv;  // documents pack one sequence
      s.set_mask(MaskSpec::documents(
          draw_document_lengths(s.seq_q, pick(1, std::min<int64_t>(s.seq_q, 12)), draw())));
      break;
    }
    default: break;
  }
  s.alibi = pick(0, 1) == 1;
  s.softcap = pick(0, 2) == 0 ? 0.0 : static_cast<double>(pick(1, 50));
  s.dtype = all_dtypes()[static_cast<std::size_t>(pick(0, 2))];
  s.layout = all_layouts()[static_cast<std::size_t>(pick(0, 1))];
  return s;
}

TEST_CASE("flash_cpu matches the oracle on random shapes, masks and modifiers, every ISA",
          "[flash_cpu][oracle][mask]") {
  auto executor = make_executor(Device::cpu);
  for (const std::string& isa_name : isa_names_built()) {
    if (!cpu_supports(isa_name)) {
      WARN("SKIPPED flash_cpu " << isa_name << ": this CPU does not support it");
      continue;
    }
    const ScopedEnvironment isa(kIsaVariable, isa_name);
    int checked = 0;
    for (uint64_t seed = 1; seed <= 40; ++seed) {
      std::mt19937_64 draw(seed);
      const Shape shape = random_masked_shape(draw);
      if (!validate(shape).empty()) continue;  // e.g. a window that leaves a query no key
      const OracleReport report = flash_cpu_through_oracle(*executor, shape, seed);
      INFO(fmt::format("flash_cpu[{}] on {} (seed {}): rel L2 {:.3g}, max abs {:.3g}", isa_name,
                       describe(shape), seed, report.rel_l2_err, report.max_abs_err));
      INFO(report.failure);
      CHECK(report.passed);
      ++checked;
    }
    CHECK(checked >= 25);  // most draws are valid shapes: the test is not vacuous
  }
}

}  // namespace
}  // namespace attnbench
