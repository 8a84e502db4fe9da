#include "harness/simd/cpu_features.h"

#include <cstdlib>

#include "harness/simd/isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace attnbench {

namespace {

#if defined(__x86_64__) || defined(__i386__)
// CPUID read directly rather than through __builtin_cpu_supports, whose feature names differ
// between compilers (clang 14 has no "f16c"). A vector extension counts only when the OS also
// saves its registers on a context switch (XCR0), or its first instruction would fault.
bool bit(unsigned reg, int index) { return (reg >> index) & 1u; }

unsigned long long read_xcr0() {
  unsigned eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<unsigned long long>(edx) << 32) | eax;
}

CpuFeatures detect_x86() {
  CpuFeatures features;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return features;
  const bool osxsave = bit(ecx, 27);
  const bool avx = bit(ecx, 28);
  const bool fma = bit(ecx, 12);
  const bool f16c = bit(ecx, 29);
  if (!osxsave || !avx) return features;
  const unsigned long long xcr0 = read_xcr0();
  const bool os_saves_ymm = (xcr0 & 0x6) == 0x6;     // SSE and AVX state
  const bool os_saves_zmm = (xcr0 & 0xe6) == 0xe6;   // ... and opmask, ZMM_Hi256, Hi16_ZMM
  if (!os_saves_ymm) return features;

  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  unsigned leaf7_ebx = 0, leaf7_1_eax = 0;
  if (max_leaf >= 7) {
    unsigned max_subleaf = 0;
    __cpuid_count(7, 0, max_subleaf, leaf7_ebx, ecx, edx);
    if (max_subleaf >= 1) __cpuid_count(7, 1, leaf7_1_eax, ebx, ecx, edx);
  }
  features.fma = fma;
  features.f16c = f16c;
  features.avx2 = bit(leaf7_ebx, 5);
  if (os_saves_zmm) {
    features.avx512f = bit(leaf7_ebx, 16);
    features.avx512bw = bit(leaf7_ebx, 30);
    features.avx512vl = bit(leaf7_ebx, 31);
    features.avx512bf16 = features.avx512f && bit(leaf7_1_eax, 5);
  }
  return features;
}
#endif

CpuFeatures detect() {
#if defined(__x86_64__) || defined(__i386__)
  return detect_x86();
#else
  CpuFeatures features;
#if defined(__aarch64__)
  features.neon = true;  // Advanced SIMD is part of the AArch64 base architecture
#endif
  return features;
#endif
}

}  // namespace

const CpuFeatures& CpuFeatures::detected() {
  static const CpuFeatures features = detect();
  return features;
}

const CpuFeatures& CpuFeatures::of_this_cpu() {
  static const CpuFeatures features = [] {
    const char* path = std::getenv("ATTNBENCH_CPU_FEATURES");
    if (path == nullptr || *path == '\0') return detected();
    return limit_to_path(path, detected());
  }();
  return features;
}

bool CpuFeatures::covers(const CpuFeatures& needed) const {
  return (!needed.avx2 || avx2) && (!needed.fma || fma) && (!needed.f16c || f16c) &&
         (!needed.avx512f || avx512f) && (!needed.avx512vl || avx512vl) &&
         (!needed.avx512bw || avx512bw) && (!needed.avx512bf16 || avx512bf16) &&
         (!needed.neon || neon);
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
