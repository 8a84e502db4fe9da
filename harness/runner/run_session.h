// The results folder a `run` session writes into, made ready before its first case: a new run's
// folder with its manifest and first peak check, or an interrupted run's folder reopened, once
// this session is known to continue it as it was begun (same config, shard and CPU model).
#pragma once

#include <string>
#include <vector>

#include "harness/plan/config.h"
#include "harness/plan/sweep.h"
#include "harness/results/manifest.h"
#include "harness/results/run_folder.h"

namespace attnbench {

// A new run in `out`: the folder is made and locked first, so a bad `out` fails before the peaks
// are measured; then the manifest (with the plan of `planned`, out of `sweep_cases`) and the start
// peak check. `peaks` receives what was measured.
RunFolder start_run_folder(const std::string& out, const SweepConfig& config,
                           const std::string& command_line, const std::string& shard,
                           const std::vector<Case>& planned, int64_t sweep_cases, bool any_cuda,
                           MeasuredPeaks& peaks);

// The interrupted run in `out`, refused (std::runtime_error) unless it was run from the same
// config (measure.memory_cap_gb may only be lowered), the same `shard` and on the same CPU model.
// This session's peak check joins the folder's, and `peaks` receives the best of them; with
// `retry_failed` the failed records are set aside, so their cases run again.
RunFolder resume_run_folder(const std::string& out, const SweepConfig& config,
                            const std::string& shard, bool retry_failed, MeasuredPeaks& peaks);

}  // namespace attnbench
