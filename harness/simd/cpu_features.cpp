#include "harness/simd/cpu_features.h"

namespace attnbench {

namespace {

CpuFeatures detect() {
  CpuFeatures features;
#if defined(__x86_64__) || defined(__i386__)
  // __builtin_cpu_supports also checks that the OS saves the wider registers (XGETBV).
  __builtin_cpu_init();
  features.avx2 = __builtin_cpu_supports("avx2");
  features.fma = __builtin_cpu_supports("fma");
  features.f16c = __builtin_cpu_supports("f16c");
  features.avx512f = __builtin_cpu_supports("avx512f");
  features.avx512vl = __builtin_cpu_supports("avx512vl");
  features.avx512bw = __builtin_cpu_supports("avx512bw");
  features.avx512bf16 = __builtin_cpu_supports("avx512bf16");
#elif defined(__aarch64__)
  features.neon = true;  // Advanced SIMD is part of the AArch64 base architecture
#endif
  return features;
}

}  // namespace

const CpuFeatures& CpuFeatures::of_this_cpu() {
  static const CpuFeatures features = detect();
  return features;
}

std::string CpuFeatures::describe() const {
  std::string names;
  const auto add = [&names](bool present, const char* name) {
    if (!present) return;
    if (!names.empty()) names += ' ';
    names += name;
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx512f, "avx512f");
  add(avx512vl, "avx512vl");
  add(avx512bw, "avx512bw");
  add(avx512bf16, "avx512bf16");
  add(neon, "neon");
  return names.empty() ? "none" : names;
}

}  // namespace attnbench
