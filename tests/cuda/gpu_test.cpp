// The GPU as the harness sees it. Without a GPU (CI, this kind of machine): reported unavailable
// with the runtime's reason, and asking for a CUDA executor throws instead of crashing. With one:
// its description, the executor's buffers, poisoning and workspace, the peaks, each CUDA
// variant's workspace claim, and the hand-written kernels' bshd path against their bhsd one.
#include "harness/measure/gpu.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>

#include "harness/measure/checked_run.h"
#include "harness/measure/inputs.h"
#include "harness/variant/registry.h"
#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

using testing::make_shape;

TEST_CASE("query_gpu describes the GPU or says why there is none", "[cuda][gpu]") {
  const GpuInfo gpu = query_gpu();
  std::string reason;
  CHECK(device_available(Device::cuda, &reason) == gpu.available);
  if (!gpu.available) {
    WARN("no GPU: " << gpu.unavailable_reason);
    CHECK_FALSE(gpu.unavailable_reason.empty());
    CHECK_FALSE(reason.empty());
    CHECK_THROWS_AS(make_executor(Device::cuda), std::runtime_error);
    const GpuPeaks peaks = measure_gpu_peaks();
    CHECK(peaks.sgemm_gflops == 0);
    CHECK(peaks.tf32_gemm_gflops == 0);
    CHECK(peaks.copy_gbps == 0);
    return;
  }
  CHECK_FALSE(gpu.name.empty());
  CHECK(gpu.sm_count > 0);
  CHECK(gpu.compute_capability >= 50);
  CHECK(gpu.memory_bytes > 0);
  CHECK(gpu.l2_bytes > 0);
  CHECK_FALSE(gpu.driver_version.empty());
  CHECK_FALSE(gpu.runtime_version.empty());
}

TEST_CASE("the CUDA variants are registered", "[cuda][gpu]") {
  for (const char* name : {"cublas", "cublas_tf32", "fused", "chunked_cuda", "flash_tc"}) {
    INFO(name);
    const RegisteredVariant* registered = Registry::instance().find(name);
    REQUIRE(registered != nullptr);
    CHECK(registered->info.device == Device::cuda);
    CHECK(registered->info.capabilities.causal);
    CHECK(registered->info.capabilities.gqa);
  }
  CHECK(Registry::instance().find("cublas_tf32")->info.capabilities.precision == Precision::tf32);
  CHECK(Registry::instance().find("cublas")->info.capabilities.returns_weights);
  CHECK(Registry::instance().find("fused")->info.capabilities.max_d == 128);
  const Capabilities& flash_tc = Registry::instance().find("flash_tc")->info.capabilities;
  CHECK(flash_tc.head_dims == std::vector<int64_t>{64, 128});
  CHECK(flash_tc.dtypes == std::vector<DType>{DType::bf16, DType::fp16});
  // The hand-written kernels index through AttentionParams' strides: both layouts.
  for (const char* name : {"fused", "chunked_cuda", "flash_tc"}) {
    INFO(name);
    CHECK(Registry::instance().find(name)->info.capabilities.layouts == all_layouts());
  }
}

TEST_CASE("the CUDA executor poisons, copies and allocates", "[cuda][gpu]") {
  if (!query_gpu().available) {
    WARN("SKIPPED: no GPU");
    return;
  }
  auto executor = make_executor(Device::cuda);
  const Shape shape = make_shape(2, 2, 1, 5, 7, 16, 8, false);
  const HostTensors inputs = make_inputs(shape, Distribution::normal, 3);
  executor->load(inputs, true);
  executor->poison_outputs();
  std::vector<float> o, weights;
  executor->fetch_outputs(o, &weights);
  REQUIRE(o.size() == static_cast<std::size_t>(shape.o_elements()));
  REQUIRE(weights.size() == static_cast<std::size_t>(shape.weight_elements()));
  for (float x : o) CHECK(std::isnan(x));
  for (float x : weights) CHECK(std::isnan(x));
  const Problem problem = executor->problem(0.5f);
  CHECK(problem.stream != nullptr);
  CHECK(problem.weights != nullptr);
  CHECK(problem.scale == 0.5f);

  Workspace& workspace = executor->workspace();
  workspace.release_all();
  workspace.reset_peak();
  void* a = workspace.allocate(1000);
  void* b = workspace.allocate(3);
  CHECK(reinterpret_cast<std::uintptr_t>(a) % 256 == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(b) % 256 == 0);
  CHECK(workspace.peak_bytes() == 1003);
  workspace.release_all();
  CHECK_NOTHROW(executor->flush_cache());
}

TEST_CASE("every CUDA variant's prepare() takes exactly workspace_bytes()", "[cuda][gpu]") {
  if (!query_gpu().available) {
    WARN("SKIPPED: no GPU");
    return;
  }
  auto executor = make_executor(Device::cuda);
  // The documents mask puts its start rows in the workspace; bf16 reaches flash_tc.
  Shape documents = testing::with_mask(make_shape(1, 4, 4, 300, 300, 64, 64, false),
                                       MaskSpec::documents({100, 1, 150, 49}));
  Shape documents_bf16 = documents;
  documents_bf16.dtype = DType::bf16;
  // A backward keeps what its forward saves and takes its own scratch.
  Shape backward = make_shape(2, 4, 2, 131, 300, 48, 80, true);
  backward.pass = Pass::bwd;
  Shape backward_bf16 = backward;
  backward_bf16.dtype = DType::bf16;
  const Shape shapes[] = {
      make_shape(1, 1, 1, 1, 1, 16, 16, false),
      make_shape(2, 4, 2, 131, 300, 48, 80, true),
      make_shape(1, 8, 1, 1, 100000, 64, 64, true),
      make_shape(2, 8, 8, 512, 512, 128, 128, false),
      documents,
      documents_bf16,
      backward,
      backward_bf16,
  };
  for (const RegisteredVariant& registered : Registry::instance().all()) {
    if (registered.info.device != Device::cuda) continue;
    for (const Shape& shape : shapes) {
      INFO(registered.info.name << " on " << describe(shape));
      if (!unsupported_reason(registered.info, shape, false).empty()) continue;
      auto variant = registered.make();
      Workspace& workspace = executor->workspace();
      workspace.release_all();
      workspace.reset_peak();
      variant->prepare(shape, workspace);
      CHECK(workspace.peak_bytes() == variant->workspace_bytes(shape));
    }
  }
}

// O of `variant` on `inputs` as laid out in `layout`, fetched in bhsd order.
std::vector<float> output_in(Executor& executor, const RegisteredVariant& registered,
                             HostTensors inputs, Layout layout) {
  inputs.shape.layout = layout;
  auto variant = registered.make();
  executor.workspace().release_all();
  variant->prepare(inputs.shape, executor.workspace());
  executor.load(inputs, false);
  executor.poison_outputs();
  executor.timed_run_ms(*variant, executor.problem(default_scale(inputs.shape)));
  std::vector<float> o;
  executor.fetch_outputs(o, nullptr);
  return o;
}

// The kernels do the same arithmetic in the same order whatever the strides, so bshd must give
// bhsd's bits exactly; a stride mixed up anywhere (Q, K, V, O, a GQA head, the split-KV combine)
// moves values. The oracle checks each layout on its own (tests/variant_oracle_test.cpp).
TEST_CASE("the hand-written kernels give the same bits in bshd as in bhsd", "[cuda][gpu]") {
  if (!query_gpu().available) {
    WARN("SKIPPED: no GPU");
    return;
  }
  auto executor = make_executor(Device::cuda);
  const Shape shapes[] = {
      make_shape(2, 4, 2, 131, 300, 64, 64, true),     // GQA, tail tiles, causal
      make_shape(1, 8, 2, 1, 20000, 128, 128, false),  // decode: chunked_cuda splits and combines
      make_shape(2, 3, 3, 70, 70, 13, 13, false),      // d not a multiple of 4: scalar copies
      make_shape(1, 2, 1, 65, 65, 48, 80, false),      // d_k != d_v
  };
  for (const char* name : {"fused", "chunked_cuda", "flash_tc"}) {
    const RegisteredVariant* registered = Registry::instance().find(name);
    REQUIRE(registered != nullptr);
    for (Shape shape : shapes) {
      shape.dtype = registered->info.capabilities.dtypes.front();
      INFO(name << " on " << describe(shape));
      if (!unsupported_reason(registered->info, shape, false).empty()) continue;
      const HostTensors inputs = make_inputs(shape, Distribution::normal, 11);
      const std::vector<float> bhsd = output_in(*executor, *registered, inputs, Layout::bhsd);
      const std::vector<float> bshd = output_in(*executor, *registered, inputs, Layout::bshd);
      REQUIRE(bhsd.size() == static_cast<std::size_t>(shape.o_elements()));
      for (float x : bhsd) REQUIRE(std::isfinite(x));
      CHECK(bshd == bhsd);
    }
  }
}

TEST_CASE("the GPU peaks are measured", "[cuda][gpu][peaks]") {
  if (!query_gpu().available) {
    WARN("SKIPPED: no GPU");
    return;
  }
  const GpuPeaks peaks = measure_gpu_peaks();
  WARN("SGEMM " << peaks.sgemm_gflops << " GFLOP/s, TF32 " << peaks.tf32_gemm_gflops
                << " GFLOP/s, copy " << peaks.copy_gbps << " GB/s");
  CHECK(peaks.sgemm_gflops > 0);
  CHECK(peaks.tf32_gemm_gflops > peaks.sgemm_gflops);
  CHECK(peaks.copy_gbps > 0);
}

}  // namespace
}  // namespace attnbench
