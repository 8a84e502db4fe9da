// Facts about the machine and the build, for the run manifest: a number is only publishable
// with the machine, compiler, threads and measured peaks it came from.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace attnbench {

struct MachineInfo {
  std::string cpu_model;
  int logical_cpus = 0;       // online CPUs
  int affinity_cpus = 0;      // CPUs this process may run on
  int omp_threads = 0;        // omp_get_max_threads()
  std::string omp_schedule;   // OMP_SCHEDULE, or "unset"
  std::string omp_proc_bind;  // OMP_PROC_BIND, or "unset"
  std::string isa;            // widest SIMD the CPU reports: avx512f, avx2, neon, or sse2
  std::string cpu_features;   // the extensions the SIMD paths use, e.g. "avx2 fma f16c"
  // What CPUID reports; differs from cpu_features when ATTNBENCH_CPU_FEATURES limits them.
  std::string cpu_features_detected;
  double memory_gb = 0;
  std::string hostname;
};

MachineInfo query_machine();

// "AMD EPYC (2 cores, avx2)" — the short description plot titles use.
std::string describe(const MachineInfo& machine);

// The commit the binary was built from (read at its last build, cmake/build_commit.cmake), with
// "+dirty" when tracked files differed from it then, or "unknown" outside a git checkout. Read
// from the checkout at run time, it named whatever the checkout had moved to since.
std::string git_commit();

// Bytes of memory the OS could give us now (MemAvailable), or 0 if unknown.
double available_memory_bytes();

nlohmann::ordered_json build_info_json();

// One line for `attnbench --version`: the source checkout the binary was built from and the
// commit it was built at (git_commit), the compiler and build type.
std::string version_line();

}  // namespace attnbench
