// attnbench slurm CONFIG --shards N --out DIR: a sweep split over a Slurm cluster. Writes an sbatch
// array job (one shard per task) and a merge job that runs after every task succeeded, and
// submits both; --resume resubmits only the shards that did not finish. The sweep's planning,
// scripts, submissions and record are harness/runner/slurm_sweep's; this file holds the options.
#include <filesystem>
#include <memory>

#include "harness/cli/commands.h"
#include "harness/cli/decimal_argument.h"
#include "harness/cli/sweep_arguments.h"
#include "harness/runner/slurm_queue.h"
#include "harness/runner/slurm_sweep.h"

namespace attnbench {

namespace {

namespace fs = std::filesystem;

// The sweep's options, and the two flags that only choose how the command runs it.
struct SlurmArguments {
  SlurmSweepOptions sweep;
  bool no_exclusive = false;
  bool resume = false;
};

// A count as a decimal number (decimal_argument.h says why not CLI11's own reading) of at least
// `minimum` (0 or 1); `rule` is the error for anything else.
CLI::Validator decimal_count(const std::string& rule, int minimum) {
  return CLI::Validator(
      [rule, minimum](const std::string& text) -> std::string {
        const DecimalArgument count = read_decimal_argument(text);
        if (count.kind == DecimalKind::past_int64) return text + " is past int64";
        return count.kind == DecimalKind::number && count.value >= minimum ? std::string() : rule;
      },
      minimum == 0 ? "INT >= 0" : "INT >= 1");
}

}  // namespace

void add_slurm_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<SlurmArguments>();
  CLI::App* slurm = app.add_subcommand(
      "slurm", "Run a sweep on a Slurm cluster: one array task per shard, then a merge job");
  slurm->add_option("config", args->sweep.config_path, "Sweep config (TOML)")
      ->required()
      ->check(CLI::ExistingFile);
  slurm->add_option("--shards", args->sweep.shards, "Number of shards (array tasks)")
      ->required()
      ->check(decimal_count("must be a decimal number", 0));
  slurm->add_option("--out", args->sweep.out, "Sweep folder: shards/, slurm/ and merged/ go here")
      ->required();
  add_variants_option(slurm, args->sweep.variants);
  slurm
      ->add_option("--set", args->sweep.overrides,
                   "Override a config key: --set measure.repetitions=5")
      ->take_all();
  slurm->add_option("--partition", args->sweep.resources.partition,
                    "Slurm partition for every job");
  slurm->add_option("--time", args->sweep.resources.time_limit,
                    "Time limit of each job, in sbatch's format (e.g. 2:00:00)");
  slurm
      ->add_option("--gpus", args->sweep.resources.gpus,
                   "GPUs per shard, requested when the sweep has CUDA variants")
      ->capture_default_str()
      ->check(
          decimal_count("must be 0 (no --gres line: give your own with --sbatch-arg) or more", 0));
  slurm
      ->add_option("--cpus-per-task", args->sweep.resources.cpus_per_task,
                   "CPUs per shard (default: the whole node, with --exclusive)")
      ->check(decimal_count("must be 1 or more", 1));
  slurm->add_option("--sbatch-arg", args->sweep.resources.sbatch_arguments,
                    "An extra sbatch argument for every job, e.g. --sbatch-arg=--account=abc "
                    "(repeatable)");
  slurm->add_flag("--no-exclusive", args->no_exclusive,
                  "Share nodes with other jobs (numbers get noisier)");
  slurm->add_flag("--allow-mixed", args->sweep.allow_mixed,
                  "Merge shards that ran on different CPU or GPU models");
  slurm->add_flag("--dry-run", args->sweep.dry_run, "Print the sbatch scripts; submit nothing");
  slurm->add_flag("--resume", args->resume,
                  "Resubmit only the shards of --out that did not finish, and the merge");
  slurm->callback([args, &exit_code] {
    args->sweep.resources.exclusive = !args->no_exclusive;
    const std::string folder = fs::absolute(args->sweep.out).lexically_normal().string();
    check_slurm_script_values(args->sweep, folder);
    if (!args->sweep.dry_run && !sbatch_on_path()) {
      throw UsageError(
          "sbatch is not on PATH: run this on a Slurm login node (or see the scripts with "
          "--dry-run)");
    }
    if (args->resume) {
      resume_slurm_sweep(args->sweep, folder);
    } else {
      start_slurm_sweep(args->sweep, folder);
    }
    exit_code = 0;
  });
}

}  // namespace attnbench
