// The Slurm commands a sweep talks to the cluster through: sbatch to submit a script, squeue to
// ask whether a job is still queued, scancel to withdraw one. Each runs as a shell command whose
// stderr passes through to the user, so Slurm's own message explains a failure.
#pragma once

#include <string>

namespace attnbench {

// Whether `sbatch` is on PATH (this is a Slurm login node).
bool sbatch_on_path();

// Submits the script at `script_path` (after `dependency`, e.g. "afterok:123", unless empty) and
// returns its job id; throws std::runtime_error naming the sbatch command when it fails.
std::string submit_job(const std::string& script_path, const std::string& dependency);

// Whether Slurm still lists the job (pending or running). A job Slurm no longer knows is over.
bool job_still_queued(const std::string& job_id);

// scancel's the job; whether it succeeded is not checked.
void cancel_job(const std::string& job_id);

}  // namespace attnbench
