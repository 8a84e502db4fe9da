// attnbench run / check: a sweep from a config file, timed into a results folder, or checked
// against the oracle only.
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <optional>

#include "harness/commands.h"
#include "harness/config.h"
#include "harness/manifest.h"
#include "harness/registry.h"
#include "harness/run_folder.h"
#include "harness/sweep.h"
#include "harness/sweep_runner.h"

namespace attnbench {

namespace {

struct SweepArguments {
  std::string config_path;
  std::vector<std::string> variants;  // --variants a,b overrides the config's list
  std::vector<std::string> overrides;
  std::string out;
  std::string shard;
  bool resume = false;
};

void add_sweep_options(CLI::App* command, SweepArguments& args) {
  command->add_option("config", args.config_path, "Sweep config (TOML), e.g. configs/quick.toml")
      ->required();
  command
      ->add_option("--variants", args.variants,
                   "Variants or groups (cpu, cuda, all) instead of the config's")
      ->delimiter(',');
  command->add_option("--set", args.overrides, "Override a config key: --set measure.repetitions=5")
      ->take_all();
}

// Loads the config and lists its cases, failing on any bad input before anything is written.
std::vector<Case> plan_cases(const SweepArguments& args, SweepConfig& config) {
  config = load_config(args.config_path, args.overrides);
  if (!args.variants.empty()) {
    // Part of the effective config, so a --resume with other variants is refused like one with
    // other --set values: the case indices would not line up.
    config.variants = args.variants;
    config.as_json["variants"] = args.variants;
  }
  std::vector<Case> cases = expand_cases(config, resolve_variants(config.variants));
  if (!args.shard.empty()) cases = select_shard(cases, parse_shard(args.shard));
  return cases;
}

std::string default_out(const SweepConfig& config) {
  return fmt::format("results/{}-{:%Y%m%d-%H%M%S}", config.name,
                     fmt::gmtime(std::chrono::system_clock::now()));
}

// The command as a user would retype it, for the manifest.
std::string command_line(const SweepArguments& args) {
  std::string line = "attnbench run " + args.config_path;
  if (!args.variants.empty()) line += fmt::format(" --variants {}", fmt::join(args.variants, ","));
  for (const std::string& assignment : args.overrides) line += " --set " + assignment;
  if (!args.shard.empty()) line += " --shard " + args.shard;
  if (!args.out.empty()) line += " --out " + args.out;
  return line;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<SweepArguments>();
  CLI::App* run =
      app.add_subcommand("run", "Run a benchmark sweep from a config file into a results folder");
  add_sweep_options(run, *args);
  run->add_option("--out", args->out, "Results folder (default: results/<name>-<UTC time>)");
  run->add_flag("--resume", args->resume,
                "Finish the interrupted run in --out without redoing its cases");
  run->add_option("--shard", args->shard,
                  "Run the cases whose index is I mod N: I/N with 0 <= I < N");
  run->callback([args, &exit_code] {
    SweepConfig config;
    const std::vector<Case> cases = plan_cases(*args, config);
    if (args->resume && args->out.empty())
      throw UsageError("--resume needs --out naming the run to finish");
    const std::string out = args->out.empty() ? default_out(config) : args->out;

    bool any_cuda = false;
    for (const Case& c : cases)
      any_cuda = any_cuda || Registry::instance().find(c.variant)->info.device == Device::cuda;

    MeasuredPeaks peaks;
    std::optional<RunFolder> folder;
    if (args->resume) {
      folder.emplace(RunFolder::open_existing(out));
      if (folder->manifest().value("config", nlohmann::ordered_json()) != config.as_json) {
        throw UsageError(fmt::format(
            "{}: was run from a different config (or --set or --variants values); resume with the "
            "same ones",
            out));
      }
      if (folder->manifest().value("shard", "") != args->shard) {
        throw UsageError(fmt::format("{}: was run with --shard '{}'", out,
                                     folder->manifest().value("shard", "")));
      }
      peaks = peaks_from_manifest(folder->manifest());
      fmt::print("resuming {}: {} cases already finished\n", out, folder->records().size());
    } else {
      // The folder is made and locked first, so a bad --out fails before the peaks are measured.
      folder.emplace(RunFolder::create(out));
      fmt::print("measuring this machine's peaks...\n");
      folder->write_manifest(
          make_manifest(config, command_line(*args), args->shard, any_cuda, peaks));
    }
    fmt::print("{}: {} cases -> {}\n", config.name, cases.size(), out);
    SweepRunner runner(config, peaks);
    const SweepOutcome outcome = runner.run(cases, *folder);
    fmt::print(
        "{} ok, {} skipped, {} failed{} -> {}\n", outcome.ok, outcome.skipped, outcome.failed,
        outcome.already_done ? fmt::format(", {} already done", outcome.already_done) : "", out);
    if (outcome.device_lost) {
      fmt::print(stderr,
                 "attnbench: error: the GPU was lost; finished cases are kept, rerun with --resume "
                 "--out {}\n",
                 out);
    }
    // A record is never changed, so a resumed run does not retry a failed case; it still counts:
    // the run is not a success while its folder holds a failure.
    if (outcome.failed_earlier > 0) {
      fmt::print(stderr,
                 "attnbench: {} case(s) failed in an earlier attempt and are kept as recorded; "
                 "rerun them into a new --out to try again\n",
                 outcome.failed_earlier);
    }
    exit_code = outcome.failed > 0 || outcome.failed_earlier > 0 || outcome.device_lost ? 1 : 0;
  });
}

void add_check_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<SweepArguments>();
  CLI::App* check = app.add_subcommand(
      "check", "Check every case of a config against the oracle, without timing");
  add_sweep_options(check, *args);
  check->callback([args, &exit_code] {
    SweepConfig config;
    const std::vector<Case> cases = plan_cases(*args, config);
    SweepRunner runner(config, MeasuredPeaks{});
    const SweepOutcome outcome = runner.check(cases);
    fmt::print("{} passed, {} failed, {} skipped\n", outcome.ok, outcome.failed, outcome.skipped);
    exit_code = outcome.failed > 0 || outcome.device_lost ? 1 : 0;
  });
}

}  // namespace attnbench
