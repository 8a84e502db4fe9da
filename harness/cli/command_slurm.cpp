// attnbench slurm CONFIG --shards N --out DIR: a sweep split over a Slurm cluster. Writes an sbatch
// array job (one shard per task) and a merge job that runs after every task succeeded, and
// submits both; --resume resubmits only the shards that did not finish.
//
// DIR holds slurm/ (the config the jobs read, the scripts, sweep.json and the job logs),
// shards/<I>/ (one results folder per shard) and merged/ (the merged run).
#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "harness/cli/commands.h"
#include "harness/cli/slurm_scripts.h"
#include "harness/plan/config.h"
#include "harness/plan/sweep.h"
#include "harness/results/atomic_file.h"
#include "harness/results/json_file.h"
#include "harness/results/json_file.h"
#include "harness/results/sharded_run.h"
#include "harness/variant/registry.h"

namespace attnbench {

namespace {

namespace fs = std::filesystem;

struct SlurmArguments {
  std::string config_path;
  int64_t shards = 0;
  std::string out;
  std::vector<std::string> variants;
  std::vector<std::string> overrides;
  SlurmResources resources;
  bool no_exclusive = false;
  bool allow_mixed = false;
  bool dry_run = false;
  bool resume = false;
};

// Output and exit status of a shell command (stderr passes through to the user).
struct CommandResult {
  std::string output;
  int status = -1;
};

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 512> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) result.output += buffer.data();
  const int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// sbatch --parsable prints "jobid" or "jobid;cluster".
std::string submit(const std::string& script_path, const std::string& dependency) {
  std::string command = "sbatch --parsable";
  if (!dependency.empty()) command += " --dependency=" + dependency;
  command += " " + shell_quote(script_path);
  const CommandResult result = run_command(command);
  const std::string job_id = result.output.substr(0, result.output.find_first_of(";\n"));
  if (result.status != 0 || job_id.empty()) {
    throw std::runtime_error(
        fmt::format("`{}` failed (exit status {}; its message is above)", command, result.status));
  }
  return job_id;
}

// Whether Slurm still lists the job (pending or running). A job Slurm no longer knows is over.
bool still_queued(const std::string& job_id) {
  if (job_id.empty()) return false;
  const CommandResult result =
      run_command(fmt::format("squeue -h -o %i -j {} 2>/dev/null", shell_quote(job_id)));
  return result.status == 0 && result.output.find_first_not_of(" \n") != std::string::npos;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("{}: cannot read", path));
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
SlurmSweep plan_sweep(const SlurmArguments& args, const std::string& folder,
                      nlohmann::ordered_json& config_json) {
  if (args.shards < 1)
    throw UsageError(fmt::format("--shards {}: must be at least 1", args.shards));
  SweepConfig config = load_config(args.config_path, args.overrides);
  if (!args.variants.empty()) config.variants = args.variants;
  const std::vector<std::string> variants = resolve_variants(config.variants);
  const std::vector<Case> cases = expand_cases(config, variants);
  if (args.shards > static_cast<int64_t>(cases.size())) {
    throw UsageError(
        fmt::format("--shards {}: the sweep has only {} cases", args.shards, cases.size()));
  }
  SlurmSweep sweep;
  sweep.name = config.name;
  sweep.binary = fs::read_symlink("/proc/self/exe").string();
  sweep.folder = folder;
  sweep.config_path = scripts_folder(folder) + "/config.toml";
  sweep.shard_count = args.shards;
  if (!args.variants.empty())
    sweep.run_options.push_back(fmt::format("--variants={}", fmt::join(args.variants, ",")));
  for (const std::string& assignment : args.overrides) {
    sweep.run_options.push_back("--set");
    sweep.run_options.push_back(assignment);
  }
  for (int64_t index = 0; index < args.shards; ++index) {
    sweep.shard_case_counts.push_back(
        static_cast<int64_t>(select_shard(cases, Shard{index, args.shards}).size()));
  }
  for (const std::string& variant : variants) {
    sweep.needs_gpu =
        sweep.needs_gpu || Registry::instance().find(variant)->info.device == Device::cuda;
  }
  config_json = config.as_json;
  config_json["variants"] = variants;
  return sweep;
}

// Every value the scripts carry, by the option that gave it: a control character (a newline
// above all) would end a script line and start a command of the value's choosing, so it is
// refused, never quoted. The rest is quoted for bash and for sbatch's #SBATCH reader.
void check_script_values(const SlurmArguments& args, const std::string& folder) {
  const auto check = [](const std::string& option, const std::string& value) {
    if (const std::string found = control_character(value); !found.empty()) {
      throw UsageError(fmt::format(
          "{}: holds a control character ({}); a value that goes into the sbatch scripts may "
          "hold none",
          option, found));
    }
  };
  check("the config path", args.config_path);
  check("--out", args.out);
  check("--partition", args.resources.partition);
  check("--time", args.resources.time_limit);
  for (const std::string& argument : args.resources.sbatch_arguments)
    check("--sbatch-arg", argument);
  for (const std::string& assignment : args.overrides) check("--set", assignment);
  for (const std::string& variant : args.variants) check("--variants", variant);
  // The folder as the scripts name it: a relative --out takes the current folder's name too.
  check("--out (made absolute)", folder);
  if (const std::string problem = log_folder_problem(folder); !problem.empty())
    throw UsageError(fmt::format("--out {}: {}", folder, problem));
}

void print_dry_run(const SlurmSweep& sweep, const SlurmArguments& args,
                   const std::vector<int64_t>& shards) {
  const std::string scripts = scripts_folder(sweep.folder);
  fmt::print("# {}/shards.sbatch\n{}\n", scripts,
             shard_array_script(sweep, args.resources, shards));
  fmt::print("# {}/merge.sbatch\n{}\n", scripts,
             merge_script(sweep, args.resources, args.allow_mixed));
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
void submit_sweep(const SlurmSweep& sweep, const SlurmArguments& args,
                  const std::vector<int64_t>& shards, nlohmann::ordered_json& record) {
  const std::string scripts = scripts_folder(sweep.folder);
  const std::string array_path = scripts + "/shards.sbatch";
  const std::string merge_path = scripts + "/merge.sbatch";
  write_text(array_path, shard_array_script(sweep, args.resources, shards));
  write_text(merge_path, merge_script(sweep, args.resources, args.allow_mixed));
  const auto resumable = [&sweep](const std::exception& error) {
    return std::runtime_error(fmt::format(
        "{}; {} keeps what was submitted: fix that and run the same command with --resume",
        error.what(), sweep.folder));
  };
  std::string array_job;
  record["merge_job"] = "";  // the old merge job (if any) was cancelled, or never submitted
  if (!shards.empty()) {
    try {
      array_job = submit(array_path, "");
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
    merge_job = submit(merge_path, array_job.empty() ? "" : "afterok:" + array_job);
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

void start_sweep(const SlurmArguments& args, const std::string& folder) {
  nlohmann::ordered_json config_json;
  const SlurmSweep sweep = plan_sweep(args, folder, config_json);
  std::vector<int64_t> all_shards;
  for (int64_t index = 0; index < sweep.shard_count; ++index) all_shards.push_back(index);
  if (args.dry_run) return print_dry_run(sweep, args, all_shards);

  std::error_code error;
  if (fs::exists(folder, error) && !fs::is_empty(folder, error)) {
    throw UsageError(fmt::format(
        "{}: already exists; pass --resume to finish its sweep, or choose another --out", folder));
  }
  const bool created = !fs::exists(folder, error);
  fs::create_directories(scripts_folder(folder), error);
  if (error) throw UsageError(fmt::format("{}: cannot create: {}", folder, error.message()));
  nlohmann::ordered_json record = {
      {"name", sweep.name},    {"shards", sweep.shard_count},
      {"config", config_json}, {"array_job", ""},
      {"merge_job", ""},       {"submissions", nlohmann::ordered_json::array()}};
  try {
    // The jobs read a copy: editing the config while they queue must not change what they run.
    write_text(sweep.config_path, read_text(args.config_path));
    // Written before anything is submitted: from here on, --resume can finish this folder.
    write_record(sweep, record);
  } catch (...) {
    // Nothing submitted yet: take back what was made, so the same command can run again.
    fs::remove_all(created ? fs::path(folder) : fs::path(scripts_folder(folder)), error);
    throw;
  }
  submit_sweep(sweep, args, all_shards, record);
}

void resume_sweep(SlurmArguments args, const std::string& folder) {
  const std::string record_path = scripts_folder(folder) + "/sweep.json";
  if (!fs::exists(record_path))
    throw UsageError(fmt::format("{}: no sweep submitted by `attnbench slurm` to resume", folder));
  nlohmann::ordered_json record = read_json_file(record_path, uint64_t{64} << 20, "sweep record");
  const auto text_or_absent = [&record](const char* key) {
    return !record.contains(key) || record[key].is_string();
  };
  if (!record.is_object() || !record.contains("config") || !record["config"].is_object() ||
      !record.contains("shards") || !record["shards"].is_number_integer() ||
      !text_or_absent("array_job") || !text_or_absent("merge_job")) {
    throw UsageError(fmt::format(
        "{}: malformed sweep record (wants an object with 'config', an integer 'shards' and "
        "job ids as strings)",
        record_path));
  }
  nlohmann::ordered_json config_json;
  const SlurmSweep sweep = plan_sweep(args, folder, config_json);
  if (config_json != record["config"] || sweep.shard_count != record["shards"]) {
    throw UsageError(fmt::format(
        "{}: was submitted with a different config, --set, --variants or --shards ({}); resume "
        "with the same ones",
        folder, record["shards"].get<int64_t>()));
  }
  if (fs::exists(fs::path(merged_folder(folder)) / "manifest.json")) {
    fmt::print("{}: already merged into {}; nothing to resume\n", folder, merged_folder(folder));
    return;
  }
  const std::string old_array = record.value("array_job", "");
  if (still_queued(old_array)) {
    throw UsageError(fmt::format(
        "{}: array job {} is still queued or running; wait for it, or scancel it, then resume",
        folder, old_array));
  }
  const std::vector<int64_t> unfinished = unfinished_shards(sweep);
  if (args.dry_run) return print_dry_run(sweep, args, unfinished);
  // The old merge job waits on an array that can no longer succeed; the new one replaces it.
  const std::string old_merge = record.value("merge_job", "");
  if (still_queued(old_merge)) {
    run_command(fmt::format("scancel {}", shell_quote(old_merge)));
    fmt::print("cancelled the old merge job {}\n", old_merge);
  }
  if (unfinished.empty()) fmt::print("every shard is complete\n");
  submit_sweep(sweep, args, unfinished, record);
}

}  // namespace

void add_slurm_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<SlurmArguments>();
  CLI::App* slurm = app.add_subcommand(
      "slurm", "Run a sweep on a Slurm cluster: one array task per shard, then a merge job");
  slurm->add_option("config", args->config_path, "Sweep config (TOML)")
      ->required()
      ->check(CLI::ExistingFile);
  slurm->add_option("--shards", args->shards, "Number of shards (array tasks)")->required();
  slurm->add_option("--out", args->out, "Sweep folder: shards/, slurm/ and merged/ go here")
      ->required();
  slurm
      ->add_option("--variants", args->variants,
                   "Variants or groups (cpu, cuda, all) instead of the config's")
      ->delimiter(',');
  slurm->add_option("--set", args->overrides, "Override a config key: --set measure.repetitions=5")
      ->take_all();
  slurm->add_option("--partition", args->resources.partition, "Slurm partition for every job");
  slurm->add_option("--time", args->resources.time_limit,
                    "Time limit of each job, in sbatch's format (e.g. 2:00:00)");
  slurm
      ->add_option("--gpus", args->resources.gpus,
                   "GPUs per shard, requested when the sweep has CUDA variants")
      ->capture_default_str();
  slurm->add_option("--cpus-per-task", args->resources.cpus_per_task,
                    "CPUs per shard (default: the whole node, with --exclusive)");
  slurm->add_option("--sbatch-arg", args->resources.sbatch_arguments,
                    "An extra sbatch argument for every job, e.g. --sbatch-arg=--account=abc "
                    "(repeatable)");
  slurm->add_flag("--no-exclusive", args->no_exclusive,
                  "Share nodes with other jobs (numbers get noisier)");
  slurm->add_flag("--allow-mixed", args->allow_mixed,
                  "Merge shards that ran on different CPU or GPU models");
  slurm->add_flag("--dry-run", args->dry_run, "Print the sbatch scripts; submit nothing");
  slurm->add_flag("--resume", args->resume,
                  "Resubmit only the shards of --out that did not finish, and the merge");
  slurm->callback([args, &exit_code] {
    args->resources.exclusive = !args->no_exclusive;
    const std::string folder = fs::absolute(args->out).lexically_normal().string();
    check_script_values(*args, folder);
    if (!args->dry_run && run_command("command -v sbatch >/dev/null 2>&1").status != 0) {
      throw UsageError(
          "sbatch is not on PATH: run this on a Slurm login node (or see the scripts with "
          "--dry-run)");
    }
    if (args->resume) {
      resume_sweep(*args, folder);
    } else {
      start_sweep(*args, folder);
    }
    exit_code = 0;
  });
}

}  // namespace attnbench
