#include "harness/measure/machine.h"

#include <fmt/format.h>
#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "harness/measure/build_commit.h"
#include "harness/measure/build_info.h"
#include "harness/simd/cpu_features.h"

namespace attnbench {

namespace {

std::string env_or_unset(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "unset";
}

// A value from a "key : value" file such as /proc/cpuinfo or /proc/meminfo.
std::string proc_value(const char* path, const std::string& key) {
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    if (line.rfind(key, 0) == 0) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      const auto start = line.find_first_not_of(" \t", colon + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  }
  return {};
}

}  // namespace

double available_memory_bytes() {
  const std::string kb = proc_value("/proc/meminfo", "MemAvailable");
  return kb.empty() ? 0 : std::atof(kb.c_str()) * 1024.0;
}

MachineInfo query_machine() {
  MachineInfo m;
  m.cpu_model = proc_value("/proc/cpuinfo", "model name");
  if (m.cpu_model.empty()) m.cpu_model = "unknown CPU";
  m.logical_cpus = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t set;
  m.affinity_cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : m.logical_cpus;
  m.omp_threads = omp_get_max_threads();
  m.omp_schedule = env_or_unset("OMP_SCHEDULE");
  m.omp_proc_bind = env_or_unset("OMP_PROC_BIND");
  const CpuFeatures& features = CpuFeatures::of_this_cpu();
  m.isa = features.avx512f ? "avx512f" : features.avx2 ? "avx2" : features.neon ? "neon" : "sse2";
  m.cpu_features = features.describe();
  m.cpu_features_detected = CpuFeatures::detected().describe();
  const std::string total_kb = proc_value("/proc/meminfo", "MemTotal");
  m.memory_gb = total_kb.empty() ? 0 : std::atof(total_kb.c_str()) / (1024.0 * 1024.0);
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) == 0) m.hostname = host.data();
  return m;
}

std::string describe(const MachineInfo& m) {
  return fmt::format("{} ({} cores, {})", m.cpu_model, m.affinity_cpus, m.isa);
}

std::string git_commit() { return build_info::build_commit; }

nlohmann::ordered_json build_info_json() {
  return {{"cxx_compiler", build_info::cxx_compiler},
          {"cxx_flags", build_info::cxx_flags},
          {"build_type", build_info::build_type},
          {"cuda_compiler", build_info::cuda_compiler},
          {"cuda_architectures", build_info::cuda_architectures}};
}

std::string version_line() {
  return fmt::format("attnbench, source {} at {}; {}, {} build", build_info::source_dir,
                     git_commit(), build_info::cxx_compiler, build_info::build_type);
}

}  // namespace attnbench
