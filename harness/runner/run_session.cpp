#include "harness/runner/run_session.h"

#include <fmt/format.h>

#include <stdexcept>

#include "harness/measure/machine.h"
#include "harness/results/manifest.h"
#include "harness/results/peak_checks.h"
#include "harness/results/sharded_run.h"
#include "harness/runner/cpu_intensity.h"

namespace attnbench {

namespace {

// A config as recorded, less measure.memory_cap_gb: the one setting a resumed run may change.
nlohmann::ordered_json without_memory_cap(nlohmann::ordered_json config) {
  if (config.is_object() && config.contains("measure") && config["measure"].is_object()) {
    config["measure"].erase("memory_cap_gb");
    if (config["measure"].empty()) config.erase("measure");
  }
  return config;
}

double memory_cap_of(const nlohmann::ordered_json& config) {
  if (config.is_object() && config.contains("measure") && config["measure"].is_object() &&
      config["measure"].contains("memory_cap_gb") && config["measure"]["memory_cap_gb"].is_number())
    return config["measure"]["memory_cap_gb"].get<double>();
  return MeasureConfig{}.memory_cap_gb;
}

// Refuses a folder this session would not continue as it was begun.
void check_resumable(const RunFolder& folder, const std::string& out, const SweepConfig& config,
                     const std::string& shard) {
  const nlohmann::ordered_json recorded =
      folder.manifest().value("config", nlohmann::ordered_json());
  if (without_memory_cap(recorded) != without_memory_cap(config.as_json)) {
    throw std::runtime_error(fmt::format(
        "{}: was run from a different config (or --set or --variants values); resume with the "
        "same ones",
        out));
  }
  // A lower cap only skips more of the cases still to run; a higher one would run cases the
  // first session skipped as too large, so the folder would mix two rules.
  const double recorded_cap = memory_cap_of(recorded);
  if (config.measure.memory_cap_gb > recorded_cap) {
    throw std::runtime_error(fmt::format(
        "{}: was run with measure.memory_cap_gb {}; a resumed run may lower it, not raise it "
        "to {}",
        out, recorded_cap, config.measure.memory_cap_gb));
  }
  if (folder.manifest().value("shard", "") != shard) {
    throw std::runtime_error(
        fmt::format("{}: was run with --shard '{}'", out, folder.manifest().value("shard", "")));
  }
  // Threads and a forced code path change every time: a session with others would mix two sets
  // of timings in one folder (resumed with OMP_NUM_THREADS=1, the records said 1 thread, the
  // manifest 2).
  if (const auto recorded_env = folder.manifest().find("environment");
      recorded_env != folder.manifest().end() && recorded_env->is_object()) {
    const nlohmann::ordered_json here = environment_json();
    for (const auto& [name, value] : here.items()) {
      const nlohmann::ordered_json there = recorded_env->value(name, nlohmann::ordered_json());
      if (there != value) {
        throw std::runtime_error(fmt::format(
            "{}: was run with {} {}, this session has {}; resume with the same environment", out,
            name, there.is_null() ? "unset" : there.dump(),
            value.is_null() ? "it unset" : value.dump()));
      }
    }
  }
  const int here_threads = query_machine().omp_threads;
  const auto recorded_machine =
      folder.manifest().value("machine", nlohmann::ordered_json::object());
  if (const auto threads = recorded_machine.find("threads");
      threads != recorded_machine.end() && threads->is_number_integer() &&
      threads->get<int64_t>() != here_threads) {
    throw std::runtime_error(
        fmt::format("{}: was run with {} threads, this session has {}; resume it with as many", out,
                    threads->get<int64_t>(), here_threads));
  }
  // A shard's numbers must come from one kind of machine, wherever the scheduler resumes it.
  const std::string here = query_machine().cpu_model;
  const std::string there =
      folder.manifest().value("machine", nlohmann::ordered_json::object()).value("cpu_model", here);
  if (here != there) {
    throw std::runtime_error(fmt::format(
        "{}: was run on a {}, this is a {}; resume it on the same model", out, there, here));
  }
}

}  // namespace

RunFolder start_run_folder(const std::string& out, const SweepConfig& config,
                           const std::string& command_line, const std::string& shard,
                           const std::vector<Case>& planned, int64_t sweep_cases, bool any_cuda,
                           MeasuredPeaks& peaks) {
  RunFolder folder = RunFolder::create(out);
  if (config.measure.peaks != "skip") fmt::print("measuring this machine's peaks...\n");
  PeakCheck start;
  nlohmann::ordered_json manifest = make_manifest(config, command_line, shard, any_cuda, peaks,
                                                  start, lowest_cpu_intensity(planned));
  manifest["plan"] = plan_json(shard, planned, sweep_cases);
  // The manifest first: a folder killed before it has one holds no results and can be used
  // again; one killed before the start check is resumed with a check of its own.
  folder.write_manifest(manifest);
  if (!peaks.skipped) folder.append_peak_check(start);
  return folder;
}

RunFolder resume_run_folder(const std::string& out, const SweepConfig& config,
                            const std::string& shard, bool retry_failed, MeasuredPeaks& peaks) {
  RunFolder folder = RunFolder::open_existing(out);
  check_resumable(folder, out, config, shard);
  // This session's check joins the folder's: every record is rated against the best of all.
  peaks = peaks_from_manifest(folder.manifest());
  if (!peaks.skipped) {
    folder.append_peak_check(measure_peak_check("resume", peaks.cpu_bandwidth));
    nlohmann::ordered_json manifest = folder.manifest();
    write_peaks_summary(manifest, folder.peak_checks());
    folder.write_manifest(manifest);
    peaks = peaks_from_manifest(manifest);
  }
  if (retry_failed) {
    const int64_t moved = folder.set_aside_failed_records();
    fmt::print("retrying {} failed case(s); their records are kept in {}/failed_attempts.jsonl\n",
               moved, out);
  }
  // The folder's records, which may hold cases this session does not select (other --cases, a
  // peer's appended records): the end of the run says how many of its own were done before.
  fmt::print("resuming {}: {} records in the folder\n", out, folder.records().size());
  return folder;
}

}  // namespace attnbench
