#include "harness/measure/slurm_env.h"

#include <unistd.h>

#include <array>
#include <cstdlib>

namespace attnbench {

namespace {

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

}  // namespace

std::string node_name() {
  const std::string slurm_node = env_or_empty("SLURMD_NODENAME");
  if (!slurm_node.empty()) return slurm_node;
  std::array<char, 256> host{};
  return gethostname(host.data(), host.size() - 1) == 0 ? host.data() : "unknown";
}

nlohmann::ordered_json slurm_job_json() {
  if (env_or_empty("SLURM_JOB_ID").empty()) return nullptr;
  nlohmann::ordered_json job;
  for (const auto& [key, variable] :
       {std::pair{"job_id", "SLURM_JOB_ID"}, std::pair{"array_job_id", "SLURM_ARRAY_JOB_ID"},
        std::pair{"array_task_id", "SLURM_ARRAY_TASK_ID"},
        std::pair{"partition", "SLURM_JOB_PARTITION"}, std::pair{"cluster", "SLURM_CLUSTER_NAME"},
        std::pair{"nodelist", "SLURM_JOB_NODELIST"}}) {
    job[key] = env_or_empty(variable);
  }
  return job;
}

}  // namespace attnbench
