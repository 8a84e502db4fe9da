#include "harness/runner/slurm_sweep.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "harness/plan/config.h"
#include "harness/plan/sweep.h"
#include "harness/results/atomic_file.h"
#include "harness/results/json_file.h"
#include "harness/results/sharded_run.h"
#include "harness/runner/slurm_queue.h"
#include "harness/variant/registry.h"

namespace attnbench {

namespace {

namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot read", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc | std::ios::binary);
  out << text;
  out.flush();
  if (!out) throw std::runtime_error(fmt::format("{}: cannot write", path));
}

// The shards that still lack a case of their plan (or never started).
std::vector<int64_t> unfinished_shards(const SlurmSweep& sweep) {
  std::vector<int64_t> unfinished;
  for (int64_t index = 0; index < sweep.shard_count; ++index) {
    const std::string path = shard_folder(sweep.folder, index);
    bool complete = false;
    if (fs::exists(fs::path(path) / "manifest.json")) {
      try {
        complete = inspect_shard(path).complete();
      } catch (const std::exception&) {
        complete = false;  // unreadable: the resumed run says why, in its log
      }
    }
    if (!complete) unfinished.push_back(index);
  }
  return unfinished;
}

// The sweep as the jobs will run it: cases planned here, so bad input fails before submitting.
SlurmSweep plan_sweep(const SlurmSweepOptions& options, const std::string& folder,
                      nlohmann::ordered_json& config_json) {
  if (options.shards < 1)
    throw std::runtime_error(fmt::format("--shards {}: must be at least 1", options.shards));
  SweepConfig config = load_config(options.config_path, options.overrides);
  if (!options.variants.empty()) config.variants = options.variants;
  const std::vector<std::string> variants = resolve_variants(config.variants);
  const std::vector<Case> cases = expand_cases(config, variants);
  if (options.shards > static_cast<int64_t>(cases.size())) {
    throw std::runtime_error(
        fmt::format("--shards {}: the sweep has only {} cases", options.shards, cases.size()));
  }
  SlurmSweep sweep;
  sweep.name = config.name;
  sweep.binary = fs::read_symlink("/proc/self/exe").string();
  sweep.folder = folder;
  sweep.config_path = scripts_folder(folder) + "/config.toml";
  sweep.shard_count = options.shards;
  if (!options.variants.empty())
    sweep.run_options.push_back(fmt::format("--variants={}", fmt::join(options.variants, ",")));
  for (const std::string& assignment : options.overrides) {
    sweep.run_options.push_back("--set");
    sweep.run_options.push_back(assignment);
  }
  for (int64_t index = 0; index < options.shards; ++index) {
    sweep.shard_case_counts.push_back(
        static_cast<int64_t>(select_shard(cases, Shard{index, options.shards}).size()));
  }
  for (const std::string& variant : variants) {
    sweep.needs_gpu =
        sweep.needs_gpu || Registry::instance().find(variant)->info.device == Device::cuda;
  }
  config_json = config.as_json;
  config_json["variants"] = variants;
  return sweep;
}

void print_dry_run(const SlurmSweep& sweep, const SlurmSweepOptions& options,
                   const std::vector<int64_t>& shards) {
  const std::string scripts = scripts_folder(sweep.folder);
  fmt::print("# {}/shards.sbatch\n{}\n", scripts,
             shard_array_script(sweep, options.resources, shards));
  fmt::print("# {}/merge.sbatch\n{}\n", scripts,
             merge_script(sweep, options.resources, options.allow_mixed));
  fmt::print("# would run:\n#   sbatch --parsable {}/shards.sbatch\n", scripts);
  fmt::print("#   sbatch --parsable --dependency=afterok:<array job id> {}/merge.sbatch\n",
             scripts);
}

void write_record(const SlurmSweep& sweep, const nlohmann::ordered_json& record) {
  write_file_atomically(scripts_folder(sweep.folder) + "/sweep.json", record.dump(2) + "\n");
}

// Writes the scripts, submits the array job for `shards` (if any) and the merge job after it,
// and records the job ids in sweep.json for --resume. sweep.json is rewritten after each job is
// submitted, so when a submission fails the folder names every job that was submitted, and
// `--resume` finishes the sweep: it waits for (or scancel's) a submitted array and resubmits
// what is missing.
void submit_sweep(const SlurmSweep& sweep, const SlurmSweepOptions& options,
                  const std::vector<int64_t>& shards, nlohmann::ordered_json& record) {
  const std::string scripts = scripts_folder(sweep.folder);
  const std::string array_path = scripts + "/shards.sbatch";
  const std::string merge_path = scripts + "/merge.sbatch";
  write_text(array_path, shard_array_script(sweep, options.resources, shards));
  write_text(merge_path, merge_script(sweep, options.resources, options.allow_mixed));
  const auto resumable = [&sweep](const std::exception& error) {
    return std::runtime_error(fmt::format(
        "{}; {} keeps what was submitted: fix that and run the same command with --resume",
        error.what(), sweep.folder));
  };
  std::string array_job;
  record["merge_job"] = "";  // the old merge job (if any) was cancelled, or never submitted
  if (!shards.empty()) {
    try {
      array_job = submit_job(array_path, "");
    } catch (const std::exception& error) {
      record["array_job"] = "";
      write_record(sweep, record);
      throw resumable(error);
    }
    fmt::print("submitted shards {} of {} as array job {}\n", array_spec(shards), sweep.shard_count,
               array_job);
  }
  record["array_job"] = array_job;
  record["submissions"].push_back(
      {{"shards", array_spec(shards)}, {"array_job", array_job}, {"merge_job", ""}});
  write_record(sweep, record);
  std::string merge_job;
  try {
    merge_job = submit_job(merge_path, array_job.empty() ? "" : "afterok:" + array_job);
  } catch (const std::exception& error) {
    throw resumable(error);
  }
  fmt::print("submitted the merge as job {}{} -> {}\n", merge_job,
             array_job.empty() ? "" : fmt::format(" (after {} succeeds)", array_job),
             merged_folder(sweep.folder));
  record["merge_job"] = merge_job;
  record["submissions"].back()["merge_job"] = merge_job;
  write_record(sweep, record);
}

// The sweep.json of `folder`, checked: it names the config and shard count the sweep was
// submitted with, and the job ids --resume waits for or cancels.
nlohmann::ordered_json read_sweep_record(const std::string& folder) {
  const std::string record_path = scripts_folder(folder) + "/sweep.json";
  if (!fs::exists(record_path))
    throw std::runtime_error(
        fmt::format("{}: no sweep submitted by `attnbench slurm` to resume", folder));
  nlohmann::ordered_json record = read_json_file(record_path, uint64_t{64} << 20, "sweep record");
  const auto text_or_absent = [&record](const char* key) {
    return !record.contains(key) || record[key].is_string();
  };
  if (!record.is_object() || !record.contains("config") || !record["config"].is_object() ||
      !record.contains("shards") || !record["shards"].is_number_integer() ||
      !text_or_absent("array_job") || !text_or_absent("merge_job")) {
    throw std::runtime_error(fmt::format(
        "{}: malformed sweep record (wants an object with 'config', an integer 'shards' and "
        "job ids as strings)",
        record_path));
  }
  return record;
}

}  // namespace

// Every value the scripts carry, by the option that gave it: a control character (a newline
// above all) would end a script line and start a command of the value's choosing, so it is
// refused, never quoted. The rest is quoted for bash and for sbatch's #SBATCH reader.
void check_slurm_script_values(const SlurmSweepOptions& options, const std::string& folder) {
  const auto check = [](const std::string& option, const std::string& value) {
    if (const std::string found = control_character(value); !found.empty()) {
      throw std::runtime_error(fmt::format(
          "{}: holds a control character ({}); a value that goes into the sbatch scripts may "
          "hold none",
          option, found));
    }
  };
  check("the config path", options.config_path);
  check("--out", options.out);
  check("--partition", options.resources.partition);
  check("--time", options.resources.time_limit);
  for (const std::string& argument : options.resources.sbatch_arguments) {
    check("--sbatch-arg", argument);
    // Each goes into the scripts as "#SBATCH <argument>": an option, and not one that takes the
    // shards' array from the sweep.
    if (argument.empty() || argument[0] != '-')
      throw std::runtime_error(fmt::format(
          "--sbatch-arg '{}': must be an sbatch option (e.g. --account=abc)", argument));
    // sbatch takes any unambiguous prefix of a long option: --arr=0-3 sets the array too.
    if (argument.rfind("--arr", 0) == 0 || argument.rfind("-a", 0) == 0)
      throw std::runtime_error(fmt::format(
          "--sbatch-arg '{}': the shards' job array is the sweep's (--shards)", argument));
  }
  for (const std::string& assignment : options.overrides) check("--set", assignment);
  for (const std::string& variant : options.variants) check("--variants", variant);
  // The folder as the scripts name it: a relative --out takes the current folder's name too.
  check("--out (made absolute)", folder);
  if (const std::string problem = log_folder_problem(folder); !problem.empty())
    throw std::runtime_error(fmt::format("--out {}: {}", folder, problem));
}

void start_slurm_sweep(const SlurmSweepOptions& options, const std::string& folder) {
  nlohmann::ordered_json config_json;
  const SlurmSweep sweep = plan_sweep(options, folder, config_json);
  std::vector<int64_t> all_shards;
  for (int64_t index = 0; index < sweep.shard_count; ++index) all_shards.push_back(index);
  if (options.dry_run) return print_dry_run(sweep, options, all_shards);

  std::error_code error;
  if (fs::exists(folder, error) && !fs::is_empty(folder, error)) {
    throw std::runtime_error(fmt::format(
        "{}: already exists; pass --resume to finish its sweep, or choose another --out", folder));
  }
  const bool created = !fs::exists(folder, error);
  fs::create_directories(scripts_folder(folder), error);
  if (error)
    throw std::runtime_error(fmt::format("{}: cannot create: {}", folder, error.message()));
  nlohmann::ordered_json record = {
      {"name", sweep.name},    {"shards", sweep.shard_count},
      {"config", config_json}, {"array_job", ""},
      {"merge_job", ""},       {"submissions", nlohmann::ordered_json::array()}};
  try {
    // The jobs read a copy: editing the config while they queue must not change what they run.
    write_text(sweep.config_path, read_text(options.config_path));
    // Written before anything is submitted: from here on, --resume can finish this folder.
    write_record(sweep, record);
  } catch (...) {
    // Nothing submitted yet: take back what was made, so the same command can run again.
    fs::remove_all(created ? fs::path(folder) : fs::path(scripts_folder(folder)), error);
    throw;
  }
  submit_sweep(sweep, options, all_shards, record);
}

void resume_slurm_sweep(const SlurmSweepOptions& options, const std::string& folder) {
  nlohmann::ordered_json record = read_sweep_record(folder);
  nlohmann::ordered_json config_json;
  const SlurmSweep sweep = plan_sweep(options, folder, config_json);
  if (config_json != record["config"] || sweep.shard_count != record["shards"]) {
    throw std::runtime_error(fmt::format(
        "{}: was submitted with a different config, --set, --variants or --shards ({}); resume "
        "with the same ones",
        folder, record["shards"].get<int64_t>()));
  }
  if (fs::exists(fs::path(merged_folder(folder)) / "manifest.json")) {
    fmt::print("{}: already merged into {}; nothing to resume\n", folder, merged_folder(folder));
    return;
  }
  const std::string old_array = record.value("array_job", "");
  if (job_still_queued(old_array)) {
    throw std::runtime_error(fmt::format(
        "{}: array job {} is still queued or running; wait for it, or scancel it, then resume",
        folder, old_array));
  }
  const std::vector<int64_t> unfinished = unfinished_shards(sweep);
  if (options.dry_run) return print_dry_run(sweep, options, unfinished);
  // The old merge job waits on an array that can no longer succeed; the new one replaces it.
  const std::string old_merge = record.value("merge_job", "");
  if (job_still_queued(old_merge)) {
    cancel_job(old_merge);
    fmt::print("cancelled the old merge job {}\n", old_merge);
  }
  if (unfinished.empty()) fmt::print("every shard is complete\n");
  submit_sweep(sweep, options, unfinished, record);
}

}  // namespace attnbench
