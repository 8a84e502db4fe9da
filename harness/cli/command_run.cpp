// attnbench run / check: a sweep from a config file, timed into a results folder, or checked
// against the oracle only. The folder's setup (a new run, or a resumed one checked to continue as
// it began) is harness/runner/run_session's; this file holds the options and what is printed.
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/cli/commands.h"
#include "harness/cli/decimal_argument.h"
#include "harness/cli/printable.h"
#include "harness/cli/sweep_arguments.h"
#include "harness/core/diagnostic.h"
#include "harness/measure/load_average.h"
#include "harness/measure/machine.h"
#include "harness/plan/config.h"
#include "harness/plan/sweep.h"
#include "harness/results/manifest.h"
#include "harness/results/peak_checks.h"
#include "harness/results/run_folder.h"
#include "harness/runner/run_session.h"
#include "harness/runner/slurm_scripts.h"
#include "harness/runner/sweep_runner.h"
#include "harness/variant/registry.h"

namespace attnbench {

namespace {

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
  if (!args.cases.empty()) line += fmt::format(" --cases {}", fmt::join(args.cases, ","));
  if (!args.out.empty()) line += " --out " + args.out;
  return line;
}

// Prints how the run went; returns the exit code: 1 when a case failed (in this session or, kept
// as recorded, in an earlier one) or the GPU was lost.
int report_outcome(const SweepOutcome& outcome, const std::string& out) {
  fmt::print("{} ok, {} skipped, {} failed{} -> {}\n", outcome.ok, outcome.skipped, outcome.failed,
             outcome.already_done ? fmt::format(", {} already done", outcome.already_done) : "",
             out);
  if (outcome.device_lost) {
    print_diagnostic(
        "attnbench: error: the GPU was lost; finished cases are kept, rerun with --resume "
        "--out {}\n",
        printable(out));
  }
  // A resumed run retries a failed case only when asked (--retry-failed); one kept as recorded
  // still counts: the run is not a success while its folder holds a failure.
  if (outcome.failed_earlier > 0) {
    print_diagnostic(
        "attnbench: {} case(s) failed in an earlier attempt and are kept as recorded; "
        "add --retry-failed to run them again\n",
        outcome.failed_earlier);
  }
  return outcome.failed > 0 || outcome.failed_earlier > 0 || outcome.device_lost ? 1 : 0;
}

// A sweep whose table goes to a pipe that closes (`run ... | head -1`) runs its cases to the end:
// SIGPIPE ended it silently at the next row, with no summary.csv. Ignored, the closed pipe is a
// failed write, refused once at exit as a full disk is (main.cpp).
void finish_when_stdout_closes() { std::signal(SIGPIPE, SIG_IGN); }

// What a run stopped by Ctrl-C or a scheduler's SIGTERM says as it ends (it ended without a word):
// the finished cases are on disk, each record appended whole and synced, and how to finish the
// rest. Made before the run starts; the handler only writes it and ends as the signal would, so
// a shell loop around attnbench still sees the signal.
std::string& interruption_message() {
  static std::string message;
  return message;
}

extern "C" void say_interrupted(int signal_number) {
  const std::string& message = interruption_message();
  static_cast<void>(::write(STDERR_FILENO, message.data(), message.size()));
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

// The command that finishes the run in `out`, each word quoted for a shell (a path with a space,
// a --set string), to paste as it is printed.
std::string resume_command(const SweepArguments& args, const std::string& out) {
  std::vector<std::string> words{"attnbench", "run", args.config_path};
  if (!args.variants.empty())
    words.insert(words.end(), {"--variants", fmt::format("{}", fmt::join(args.variants, ","))});
  for (const std::string& assignment : args.overrides)
    words.insert(words.end(), {"--set", assignment});
  if (!args.shard.empty()) words.insert(words.end(), {"--shard", args.shard});
  if (!args.cases.empty())
    words.insert(words.end(), {"--cases", fmt::format("{}", fmt::join(args.cases, ","))});
  words.insert(words.end(), {"--out", out, "--resume"});
  std::string line;
  for (const std::string& word : words) line += (line.empty() ? "" : " ") + shell_quote(word);
  return line;
}

void announce_interruptions(const SweepArguments& args, const std::string& out) {
  interruption_message() = fmt::format(
      "\nattnbench: interrupted; the finished cases are kept in {}: finish the run with {}\n",
      printable(out), printable(resume_command(args, out)));
  std::signal(SIGINT, say_interrupted);
  std::signal(SIGTERM, say_interrupted);
}

// Once the cases have run, an interrupt ends the command as it would any other.
void stop_announcing_interruptions() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

// The run command once its arguments are parsed; returns the exit code.
int run_sweep(const SweepArguments& args) {
  finish_when_stdout_closes();
  SweepConfig config;
  int64_t sweep_cases = 0;
  // The folder's plan is the whole (shard's) sweep; --cases picks what this session runs.
  const std::vector<Case> planned = plan_cases(args, config, &sweep_cases);
  const std::vector<Case> cases = args.cases.empty() ? planned : select_cases(planned, args.cases);
  if (args.resume && args.out.empty())
    throw UsageError("--resume needs --out naming the run to finish");
  if (args.retry_failed && !args.resume)
    throw UsageError("--retry-failed needs --resume: it retries the failed cases of a run");
  const std::string out = args.out.empty() ? default_out(config) : args.out;

  bool any_cuda = false;
  for (const Case& c : cases)
    any_cuda = any_cuda || Registry::instance().find(c.variant)->info.device == Device::cuda;

  // Read before the peaks are measured (they load every core), printed once the input has
  // been accepted, so that bad input stays a one-line error.
  const std::optional<LoadAverage> load = read_load_average();

  MeasuredPeaks peaks;
  RunFolder folder = args.resume
                         ? resume_run_folder(out, config, args.shard, args.retry_failed, peaks)
                         : start_run_folder(out, config, command_line(args), args.shard, planned,
                                            sweep_cases, any_cuda, peaks);
  if (load) {
    const std::string warning =
        load_warning(*load, query_machine().affinity_cpus, config.measure.peaks != "skip");
    if (!warning.empty()) print_diagnostic("attnbench: warning: {}\n", warning);
  }
  fmt::print("{}: {} cases -> {}\n", config.name, cases.size(), out);
  announce_interruptions(args, out);
  SweepRunner runner(config, peaks);
  const SweepOutcome outcome = runner.run(cases, folder);
  stop_announcing_interruptions();
  return report_outcome(outcome, out);
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
  run->add_flag("--retry-failed", args->retry_failed,
                "With --resume: run the cases that failed earlier again (their failed records "
                "move to failed_attempts.jsonl)");
  run->add_option("--shard", args->shard,
                  "Run the cases whose index is I mod N: I/N with 0 <= I < N");
  auto case_lists = std::make_shared<std::vector<std::string>>();
  run->add_option("--cases", *case_lists,
                  "Run only the cases of these indices, as `attnbench plan` numbers them (e.g. "
                  "3 or 0,4): with --resume, a run finished a few cases at a time, alternating "
                  "with another program (a peer) so that both share the machine's noise")
      ->check(decimal_list("case index"));
  run->callback([args, case_lists, &exit_code] {
    args->cases = decimal_list_values(*case_lists);
    exit_code = run_sweep(*args);
  });
}

void add_check_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<SweepArguments>();
  CLI::App* check = app.add_subcommand(
      "check", "Check every case of a config against the oracle, without timing");
  add_sweep_options(check, *args);
  auto as_json = std::make_shared<bool>(false);
  check->add_flag(
      "--json", *as_json,
      "Print the results as JSON (one record per case and input distribution, the schema of "
      "`attnbench schema`; passed/failed/skipped count cases)");
  check->callback([args, as_json, &exit_code] {
    finish_when_stdout_closes();
    SweepConfig config;
    int64_t sweep_cases = 0;
    const std::vector<Case> cases = plan_cases(*args, config, &sweep_cases);
    SweepRunner runner(config, MeasuredPeaks{});
    std::vector<CaseRecord> records;
    const SweepOutcome outcome = runner.check(cases, *as_json ? &records : nullptr);
    if (*as_json) {
      nlohmann::ordered_json out;
      out["config"] = config.name;
      out["passed"] = outcome.ok;
      out["failed"] = outcome.failed;
      out["skipped"] = outcome.skipped;
      out["device_lost"] = outcome.device_lost;
      out["records"] = nlohmann::ordered_json::array();
      // Rated as a results folder's records are; no peaks are measured, so none is known.
      for (const CaseRecord& record : records)
        out["records"].push_back(rate_record(to_json(record), PeakChecks{}));
      fmt::print("{}\n", out.dump(2));
    } else {
      fmt::print("{} passed, {} failed, {} skipped\n", outcome.ok, outcome.failed, outcome.skipped);
    }
    exit_code = outcome.failed > 0 || outcome.device_lost ? 1 : 0;
  });
}

}  // namespace attnbench
