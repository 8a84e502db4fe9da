// The SIMD path choice never picks a path the CPU lacks. The CPU's features are an argument, so
// these tests ask what CPUs with fewer features than this one would run, whatever this host has.
#include <catch2/catch.hpp>
#include <fstream>
#include <stdexcept>
#include <string>

#include "harness/simd/cpu_features.h"
#include "harness/simd/isa.h"
#include "harness/simd/throughput_loops.h"
#include "variants/cpu/flash_cpu/isa_choice.h"

namespace attnbench {
namespace {

CpuFeatures no_features() { return CpuFeatures{}; }

CpuFeatures avx2_only() {
  CpuFeatures features;
  features.avx2 = features.fma = features.f16c = true;
  return features;
}

CpuFeatures avx512_without_bf16() {
  CpuFeatures features = avx2_only();
  features.avx512f = features.avx512vl = features.avx512bw = true;
  return features;
}

CpuFeatures avx512_with_bf16() {
  CpuFeatures features = avx512_without_bf16();
  features.avx512bf16 = true;
  return features;
}

bool built(Isa isa) {
  for (Isa candidate : isas_built())
    if (candidate == isa) return true;
  return false;
}

const auto kBf16Faster = [] { return true; };
const auto kBf16Slower = [] { return false; };

TEST_CASE("a path runs only where every extension it needs is present", "[simd]") {
  CHECK(isa_runs_on(Isa::scalar, no_features()));
  CHECK_FALSE(isa_runs_on(Isa::avx2, no_features()));
  CHECK_FALSE(isa_runs_on(Isa::avx512, avx2_only()));
  CHECK_FALSE(isa_runs_on(Isa::avx512_bf16, avx512_without_bf16()));
  // Each extension is needed on its own: AVX2 without F16C, AVX-512 BF16 without VL.
  CpuFeatures no_f16c = avx2_only();
  no_f16c.f16c = false;
  CHECK_FALSE(isa_runs_on(Isa::avx2, no_f16c));
  CpuFeatures no_vl = avx512_with_bf16();
  no_vl.avx512vl = false;
  CHECK_FALSE(isa_runs_on(Isa::avx512_bf16, no_vl));
  if (built(Isa::avx2)) {
    CHECK(isa_runs_on(Isa::avx2, avx2_only()));
    CHECK(isa_runs_on(Isa::avx512, avx512_without_bf16()));
    CHECK(isa_runs_on(Isa::avx512_bf16, avx512_with_bf16()));
  }
  // A path not built into this binary never runs, whatever the features say.
  CpuFeatures everything = avx512_with_bf16();
  everything.neon = true;
  for (Isa isa : {Isa::avx2, Isa::avx512, Isa::avx512_bf16, Isa::neon})
    CHECK(isa_runs_on(isa, everything) == built(isa));
}

TEST_CASE("flash_cpu chooses the widest path the CPU has", "[simd][flash_cpu]") {
  using flash_cpu::choose_isa;
  CHECK(choose_isa("", no_features(), kBf16Faster) == Isa::scalar);
  if (built(Isa::avx2)) {
    CHECK(choose_isa("", avx2_only(), kBf16Faster) == Isa::avx2);
    CHECK(choose_isa("", avx512_without_bf16(), kBf16Faster) == Isa::avx512);
    CHECK(choose_isa("", avx512_with_bf16(), kBf16Slower) == Isa::avx512);
    CHECK(choose_isa("", avx512_with_bf16(), kBf16Faster) == Isa::avx512_bf16);
  }
  if (built(Isa::neon)) {
    CpuFeatures neon;
    neon.neon = true;
    CHECK(choose_isa("", neon, kBf16Faster) == Isa::neon);
  }
}

TEST_CASE("the bf16 probe runs only where avx512_bf16 could be chosen", "[simd][flash_cpu]") {
  int probes = 0;
  const auto counting_probe = [&probes] {
    ++probes;
    return true;
  };
  flash_cpu::choose_isa("", avx2_only(), counting_probe);
  flash_cpu::choose_isa("", avx512_without_bf16(), counting_probe);
  CHECK(probes == 0);
}

TEST_CASE("an ISA override the CPU lacks is refused with a reason", "[simd][flash_cpu]") {
  using flash_cpu::choose_isa;
  CHECK(choose_isa("scalar", no_features(), kBf16Faster) == Isa::scalar);
  // Where avx2 is built, the reason is the CPU; elsewhere (aarch64) it is the build.
  CHECK_THROWS_WITH(choose_isa("avx2", no_features(), kBf16Faster),
                    Catch::Contains("avx2") &&
                        Catch::Contains(built(Isa::avx2) ? "this CPU has none"
                                                         : "not built for this architecture"));
  CHECK_THROWS_AS(choose_isa("avx512", avx2_only(), kBf16Faster), std::invalid_argument);
  CHECK_THROWS_AS(choose_isa("avx512_bf16", avx512_without_bf16(), kBf16Faster),
                  std::invalid_argument);
  CHECK_THROWS_WITH(choose_isa("sse1", avx512_with_bf16(), kBf16Faster),
                    Catch::Contains("'sse1' is not one of scalar, avx2, avx512"));
  if (!built(Isa::neon)) {
    CpuFeatures neon;
    neon.neon = true;
    CHECK_THROWS_WITH(choose_isa("neon", neon, kBf16Faster),
                      Catch::Contains("not built for this architecture"));
  }
}

TEST_CASE("the throughput loops run only instructions the features name", "[simd][peaks]") {
  // The FLOPs a step reports say which loop ran: 12 chains x lanes x 2.
  double flops_per_step = 0;
  run_fma_loop(no_features(), 1000, flops_per_step);
  CHECK(flops_per_step == 12 * 4 * 2);
  const CpuFeatures& host = CpuFeatures::of_this_cpu();
  if (host.avx2 && host.fma) {
    run_fma_loop(avx2_only(), 1000, flops_per_step);
    CHECK(flops_per_step == 12 * 8 * 2);
  }
  // Without AVX512_BF16 the bf16 loop does nothing (and reports no FLOPs), on any host.
  CHECK(run_bf16_dot_loop(avx512_without_bf16(), 1000, flops_per_step) == 0);
  CHECK(flops_per_step == 0);
  CHECK_FALSE(bf16_dot_outpaces_fma(avx2_only()));
}

TEST_CASE("ATTNBENCH_CPU_FEATURES limits a CPU to one path's features, never beyond", "[simd]") {
  if (built(Isa::avx2)) {
    // An AVX-512 CPU seen as an AVX2-only one: the choice and the peak loops see AVX2 at most.
    const CpuFeatures limited = limit_to_path("avx2", avx512_with_bf16());
    CHECK(limited.describe() == "avx2 fma f16c");
    CHECK(widest_isa(limited) == Isa::avx2);
    CHECK_FALSE(isa_runs_on(Isa::avx512, limited));
    CHECK(limit_to_path("avx512", avx512_with_bf16()).describe() == "avx2 fma f16c avx512f");
    // A path the CPU cannot run is refused, not granted.
    CHECK_THROWS_WITH(limit_to_path("avx512", avx2_only()),
                      Catch::Contains("ATTNBENCH_CPU_FEATURES") && Catch::Contains("needs"));
  }
  CHECK(limit_to_path("scalar", avx512_with_bf16()).describe() == "none");
  CHECK(widest_isa(limit_to_path("scalar", avx2_only())) == Isa::scalar);
  CHECK_THROWS_WITH(limit_to_path("avx3", avx512_with_bf16()),
                    Catch::Contains("'avx3' is not one of"));
}

#if defined(__x86_64__) || defined(__i386__)
// Whether /proc/cpuinfo names a flag (Linux); false where there is no such file. x86 only: an
// AArch64 build asks it nothing (below).
bool cpuinfo_has(const std::string& flag) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string word;
  while (cpuinfo >> word)
    if (word == flag) return true;
  return false;
}
#endif

TEST_CASE("AMX counts as present only where the CPU has it and the OS lets it run", "[simd]") {
  const CpuFeatures& detected = CpuFeatures::detected();
#if defined(__x86_64__) || defined(__i386__)
  const bool listed = cpuinfo_has("amx_tile");
#else
  // Not an x86 build: no AMX, whatever /proc/cpuinfo says (under qemu-aarch64 on an AMX host it is
  // the host's).
  const bool listed = false;
#endif
  if (!listed) {
    // This host: no AMX, so no tile instruction may ever run.
    CHECK_FALSE(detected.amx_tile);
    CHECK_FALSE(detected.amx_bf16);
    CHECK_FALSE(detected.amx_fp16);
    CHECK(detected.describe().find("amx") == std::string::npos);
  } else {
    // Linux lists it; either the permission was granted or the refusal says why.
    CHECK((detected.amx_tile || !detected.amx_unusable.empty()));
    if (!detected.amx_tile) CHECK_FALSE(detected.amx_bf16);
    if (detected.amx_bf16) CHECK(detected.describe().find("amx_bf16") != std::string::npos);
  }
  if (!detected.amx_unusable.empty())
    CHECK(detected.describe().find("AMX unusable: " + detected.amx_unusable) != std::string::npos);
  // A CPU with AMX limited to the avx512_bf16 path (ATTNBENCH_CPU_FEATURES=avx512_bf16) has none.
  if (built(Isa::avx512_bf16)) {
    CpuFeatures amx = avx512_with_bf16();
    amx.amx_tile = amx.amx_bf16 = amx.amx_fp16 = true;
    CHECK(amx.describe() ==
          "avx2 fma f16c avx512f avx512vl avx512bw avx512bf16 amx_tile amx_bf16 amx_fp16");
    const CpuFeatures limited = limit_to_path("avx512_bf16", amx);
    CHECK_FALSE((limited.amx_tile || limited.amx_bf16 || limited.amx_fp16));
    CpuFeatures refused = avx512_with_bf16();
    refused.amx_unusable = "Linux refused it";
    CHECK(refused.describe() ==
          "avx2 fma f16c avx512f avx512vl avx512bw avx512bf16 (AMX unusable: Linux refused it)");
  }
}

TEST_CASE("covers compares feature sets", "[simd]") {
  CHECK(avx512_with_bf16().covers(avx2_only()));
  CHECK_FALSE(avx2_only().covers(avx512_without_bf16()));
  CHECK(no_features().covers(no_features()));
}

TEST_CASE("CPU features describe themselves", "[simd]") {
  CHECK(no_features().describe() == "none");
  CHECK(avx2_only().describe() == "avx2 fma f16c");
  CHECK_FALSE(CpuFeatures::of_this_cpu().describe().empty());
}

}  // namespace
}  // namespace attnbench
