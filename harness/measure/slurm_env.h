// Where a run executes, as Slurm tells it: the node and the job, for the manifest. A sweep split
// over a cluster is only trustworthy if every shard says which node it ran on.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace attnbench {

// SLURMD_NODENAME inside a Slurm job, else this host's name.
std::string node_name();

// The job, array task, partition and cluster from the SLURM_* environment; null outside a job.
nlohmann::ordered_json slurm_job_json();

}  // namespace attnbench
