// A sweep split over a Slurm cluster, as `attnbench slurm` runs it: planned here (so bad input
// fails before anything is submitted), written as an sbatch array job (one shard per task) and a
// merge job that runs after every task succeeded, submitted, and recorded in the sweep folder's
// slurm/sweep.json so that a resumed sweep resubmits only the shards that did not finish.
//
// The folder holds slurm/ (the config the jobs read, the scripts, sweep.json and the job logs),
// shards/<I>/ (one results folder per shard) and merged/ (the merged run).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/runner/slurm_scripts.h"

namespace attnbench {

// What the user asked for; errors name the option each value came from.
struct SlurmSweepOptions {
  std::string config_path;
  int64_t shards = 0;
  std::string out;  // as given; the functions below take it made absolute
  std::vector<std::string> variants;
  std::vector<std::string> overrides;  // --set assignments
  SlurmResources resources;
  bool allow_mixed = false;
  bool dry_run = false;  // print the scripts; submit nothing
};

// Refuses (std::runtime_error) a value that would go into the scripts and cannot: a control
// character in any of them, or a `folder` (--out made absolute) sbatch cannot name logs in.
void check_slurm_script_values(const SlurmSweepOptions& options, const std::string& folder);

// Plans the sweep, makes `folder` (which must be absent or empty) and submits every shard and the
// merge, printing the job ids.
void start_slurm_sweep(const SlurmSweepOptions& options, const std::string& folder);

// Finishes the sweep in `folder`, submitted with the same config, --set, --variants and --shards:
// resubmits the shards that did not finish and a merge job after them (cancelling the old one).
void resume_slurm_sweep(const SlurmSweepOptions& options, const std::string& folder);

}  // namespace attnbench
