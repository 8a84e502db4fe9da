#include "harness/simd/cpu_features.h"

#include <cstdlib>

#include "harness/simd/isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

// Linux (5.16 on) hands the tile data state (XFEATURE_XTILEDATA, 8 KiB per thread) only to a
// process that asks for it; before that, the first tile instruction faults. Asked at most once
// per process: `detected()` runs this inside its thread-safe static initialisation. Returns an
// empty string when granted, else the reason.
std::string request_tile_permission() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kArchRequestXcompPerm = 0x1023;  // ARCH_REQ_XCOMP_PERM (asm/prctl.h)
  constexpr long kXfeatureXtiledata = 18;         // XFEATURE_XTILEDATA
  if (syscall(SYS_arch_prctl, kArchRequestXcompPerm, kXfeatureXtiledata) == 0) return "";
  return std::string("Linux refused arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): ") +
         std::strerror(errno);
#else
  return "no way to ask this OS for the tile state";
#endif
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
  const bool os_saves_ymm = (xcr0 & 0x6) == 0x6;    // SSE and AVX state
  const bool os_saves_zmm = (xcr0 & 0xe6) == 0xe6;  // ... and opmask, ZMM_Hi256, Hi16_ZMM
  if (!os_saves_ymm) return features;

  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  unsigned leaf7_ebx = 0, leaf7_edx = 0, leaf7_1_eax = 0;
  if (max_leaf >= 7) {
    unsigned max_subleaf = 0;
    __cpuid_count(7, 0, max_subleaf, leaf7_ebx, ecx, leaf7_edx);
    if (max_subleaf >= 1) __cpuid_count(7, 1, leaf7_1_eax, ebx, ecx, edx);
  }
  features.fma = fma;
  features.f16c = f16c;
  features.avx2 = bit(leaf7_ebx, 5);
  if (os_saves_zmm) {
    features.avx512f = bit(leaf7_ebx, 16);
    features.avx512dq = bit(leaf7_ebx, 17);
    features.avx512bw = bit(leaf7_ebx, 30);
    features.avx512vl = bit(leaf7_ebx, 31);
    features.avx512bf16 = features.avx512f && bit(leaf7_1_eax, 5);
  }
  // AMX: CPUID.7.0 EDX bit 24 (AMX-BF16), bit 22 (AMX-TILE); CPUID.7.1 EAX bit 21 (AMX-FP16). The
  // OS must enable XTILECFG and XTILEDATA (XCR0 bits 17, 18) and, on Linux, grant the permission.
  const bool cpu_has_tiles = bit(leaf7_edx, 22);
  if (cpu_has_tiles) {
    const bool os_saves_tiles = (xcr0 & 0x60000) == 0x60000;
    features.amx_unusable =
        os_saves_tiles ? request_tile_permission()
                       : std::string("the OS does not enable the tile state (XCR0 bits 17, 18)");
    if (features.amx_unusable.empty()) {
      features.amx_tile = true;
      features.amx_bf16 = bit(leaf7_edx, 24);
      features.amx_fp16 = bit(leaf7_1_eax, 21);
    }
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
         (!needed.avx512bw || avx512bw) && (!needed.avx512dq || avx512dq) &&
         (!needed.avx512bf16 || avx512bf16) && (!needed.amx_tile || amx_tile) &&
         (!needed.amx_bf16 || amx_bf16) && (!needed.amx_fp16 || amx_fp16) && (!needed.neon || neon);
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
  add(avx512dq, "avx512dq");
  add(avx512bf16, "avx512bf16");
  add(amx_tile, "amx_tile");
  add(amx_bf16, "amx_bf16");
  add(amx_fp16, "amx_fp16");
  add(neon, "neon");
  if (names.empty()) names = "none";
  if (!amx_unusable.empty()) names += " (AMX unusable: " + amx_unusable + ")";
  return names;
}

}  // namespace attnbench
