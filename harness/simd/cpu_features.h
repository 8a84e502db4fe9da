// What the CPU can run: the instruction-set extensions the SIMD code paths need, read once from
// CPUID on x86 (aarch64 always has NEON). Code that picks a path takes a CpuFeatures argument
// rather than asking the CPU itself, so a test can ask what a CPU with fewer features would run.
#pragma once

#include <string>

namespace attnbench {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512vl = false;
  bool avx512bw = false;
  bool avx512bf16 = false;
  bool neon = false;

  // This CPU's, detected on first use (never during static initialisation).
  static const CpuFeatures& of_this_cpu();
  // The extensions present, space-separated ("avx2 fma f16c"), or "none".
  std::string describe() const;
};

}  // namespace attnbench
