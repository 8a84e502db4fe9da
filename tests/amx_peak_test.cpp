// The AMX roof: bf16 records are rated against the best of the FMA, vdpbf16ps and AMX peaks; the
// AMX peak check is a line of peaks.jsonl where measured and absent elsewhere; its loop runs only
// where the features say AMX is usable. Synthetic peaks; only the loop's refusal runs.
#include <catch2/catch.hpp>

#include "harness/results/manifest.h"
#include "harness/results/peak_checks.h"
#include "harness/simd/cpu_features.h"
#include "harness/simd/throughput_loops.h"

namespace attnbench {
namespace {

TEST_CASE("bf16 is rated against the highest roof the CPU has for it", "[peaks][tiles]") {
  MeasuredPeaks peaks;
  peaks.cpu_gflops = 480;  // an Intel Xeon with AMX, 2 cores
  peaks.cpu_bf16_gflops = 240;
  peaks.cpu_amx_bf16_gflops = 4800;
  const PeakChoice bf16 = peak_for(peaks, Device::cpu, DType::bf16, Precision::fp32);
  CHECK(bf16.name == "cpu_amx_bf16_gflops");
  CHECK(bf16.gflops == 4800);
  // fp32 and fp16 stay on the FMA roof.
  CHECK(peak_for(peaks, Device::cpu, DType::fp32, Precision::fp32).name == "cpu_fma_gflops");
  CHECK(peak_for(peaks, Device::cpu, DType::fp16, Precision::fp32).name == "cpu_fma_gflops");
  // Without AMX (Zen 4: vdpbf16ps at twice the FMA rate), as before.
  peaks.cpu_amx_bf16_gflops = 0;
  peaks.cpu_gflops = 234;
  peaks.cpu_bf16_gflops = 466;
  CHECK(peak_for(peaks, Device::cpu, DType::bf16, Precision::fp32).name == "cpu_bf16_dot_gflops");
  peaks.cpu_bf16_gflops = 0;
  CHECK(peak_for(peaks, Device::cpu, DType::bf16, Precision::fp32).name == "cpu_fma_gflops");
}

TEST_CASE("the AMX peak check is a line of peaks.jsonl only where it was measured",
          "[peaks][tiles]") {
  PeakCheck check;
  check.when = "start";
  check.cpu_fma_gflops = 480;
  check.cpu_amx_bf16_gflops = 4800;
  const nlohmann::ordered_json line = check.to_json();
  CHECK(line["cpu_amx_bf16_gflops"] == 4800.0);
  CHECK(PeakCheck::from_json(line).cpu_amx_bf16_gflops == 4800);
  PeakChecks checks;
  checks.add(check);
  check.cpu_amx_bf16_gflops = 5000;
  checks.add(check);
  CHECK(checks.best("cpu_amx_bf16_gflops") == 5000);
  check.cpu_amx_bf16_gflops = 0;
  CHECK_FALSE(check.to_json().contains("cpu_amx_bf16_gflops"));
  // A manifest's summary names it; a reader of an older manifest reads 0.
  nlohmann::ordered_json manifest;
  manifest["peaks"] = {{"cpu_fma_gflops", 480.0}, {"cpu_amx_bf16_gflops", 4800.0}};
  CHECK(peaks_from_manifest(manifest).cpu_amx_bf16_gflops == 4800);
  manifest["peaks"].erase("cpu_amx_bf16_gflops");
  CHECK(peaks_from_manifest(manifest).cpu_amx_bf16_gflops == 0);
}

TEST_CASE("the AMX loop runs only where AMX is usable", "[peaks][tiles][simd]") {
  CpuFeatures no_amx;
  no_amx.avx512f = no_amx.avx512bw = no_amx.avx512vl = no_amx.avx512bf16 = true;
  double flops_per_step = -1;
  CHECK(run_amx_bf16_loop(no_amx, 1000, flops_per_step) == 0);
  CHECK(flops_per_step == 0);
  const CpuFeatures& host = CpuFeatures::of_this_cpu();
  run_amx_bf16_loop(host, 1000, flops_per_step);
  CHECK(flops_per_step == (host.amx_bf16 ? 4 * 16 * 16 * 32 * 2 : 0));
}

}  // namespace
}  // namespace attnbench
