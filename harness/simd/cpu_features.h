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
  bool avx512dq = false;
  bool avx512bf16 = false;
  // The matrix engine (Intel AMX): tile registers and configuration, and TDPBF16PS / TDPFP16PS.
  // Present only when the CPU has it, the OS saves the tile state (XCR0) and Linux granted this
  // process the right to use it (arch_prctl ARCH_REQ_XCOMP_PERM, asked once, on first detection);
  // otherwise false, and a tile instruction would fault.
  bool amx_tile = false;
  bool amx_bf16 = false;
  bool amx_fp16 = false;
  bool neon = false;
  // Why a CPU that has AMX cannot use it here (the OS does not enable the tile state, or Linux
  // refused the permission, with its reason); empty otherwise.
  std::string amx_unusable;

  // This CPU's, detected on first use (never during static initialisation), limited to those of
  // the path ATTNBENCH_CPU_FEATURES names when it is set (see limit_to_path in isa.h): every
  // choice of code path and every peak loop then sees a CPU with only those. Throws
  // std::invalid_argument when that variable names no path or one this CPU cannot run.
  static const CpuFeatures& of_this_cpu();
  // The features as CPUID reports them, ignoring ATTNBENCH_CPU_FEATURES.
  static const CpuFeatures& detected();

  // Whether every feature `needed` names is present here.
  bool covers(const CpuFeatures& needed) const;
  // The extensions present, space-separated ("avx2 fma f16c"), or "none"; followed by
  // amx_unusable in parentheses when it is set.
  std::string describe() const;
};

}  // namespace attnbench
