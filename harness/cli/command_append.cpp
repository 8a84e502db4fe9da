// attnbench append DIR: turns measurements taken outside attnbench (the PyTorch peer) into
// records, through the same record code as a sweep, and appends them to the results folder DIR.
// Reads one JSON object per line on stdin:
//   {"index", "variant", "device", the shape's fields (as `plan --json` prints them), "precision",
//    "status", "reason", "times_ms": [...], "workspace_bytes", "peak_gflops", "peak_name",
//    "oracle": {"max_abs_err", "rel_l2_err", "rel_l2_tolerance", "sampled"} | null, "threads",
//    "distribution", "code_path" (or its old name "isa"), "output", "seed", "target_rel_ci"}
// and prints each record it appended, one per line, so no tool outside C++ computes GFLOP/s,
// bytes or percent of peak, or lists the record's fields.
//
// "output" (instead of "oracle") names the producer's O as a float32 .npy [batch, heads, seq_q,
// d_v]: append draws the inputs again from "seed" and "distribution" (as `attnbench prepare`
// drew them for the producer) and runs the oracle on it with the folder's config, so the verdict
// and the tolerance are the harness's own; an output the oracle fails makes the record failed.
//
// attnbench append --init DIR --config CONFIG [--set K=V]... [--device cpu|cuda] makes DIR, a
// new results folder for such measurements, with the manifest a sweep writes (machine, build,
// peaks, config); stdin may hold one JSON object describing the producer: {"name": the run's
// name, "peaks": {name: GFLOP/s} added to the manifest's, "peer": {...} kept as given}.
//
// All of stdin is read, and every line checked against the schema (types, ranges, names, the
// shape, its case id unique in the folder and the input), before any is written: the lines are
// appended all or none, and a refusal names the line. A producer that wants each record on disk as
// it is measured (the PyTorch peer) runs append once per measurement. A line longer than 1 MiB is
// refused as it is read, so `append < /dev/zero` fails at once.
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "harness/cli/commands.h"
#include "harness/results/measurement_records.h"
#include "harness/results/peak_checks.h"
#include "harness/results/producer_folder.h"
#include "harness/results/run_folder.h"
#include "harness/variant/registry.h"

namespace attnbench {

namespace {

constexpr std::size_t max_line_bytes = std::size_t{1} << 20;   // one measurement
constexpr std::size_t max_input_bytes = std::size_t{1} << 28;  // all of them, checked together

// Every line of stdin as (line number, text) pairs, blank lines left out. A line over
// max_line_bytes, or input over max_input_bytes, is refused as soon as it is read, so
// `append < /dev/zero` fails at once instead of growing without end.
std::vector<std::pair<int64_t, std::string>> read_measurement_lines() {
  std::vector<std::pair<int64_t, std::string>> lines;
  std::size_t input_bytes = 0;
  int64_t line_number = 0;
  std::string pending;
  const auto take_line = [&] {
    ++line_number;
    std::string line = std::move(pending);
    pending.clear();
    if (line.find_first_not_of(" \t\r") == std::string::npos) return;
    lines.emplace_back(line_number, std::move(line));
  };
  char buffer[1 << 16];
  while (true) {
    const ssize_t got = ::read(STDIN_FILENO, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw std::runtime_error(fmt::format("stdin: {}", std::strerror(errno)));
    if (got == 0) break;
    input_bytes += static_cast<std::size_t>(got);
    if (input_bytes > max_input_bytes) {
      throw UsageError(fmt::format("stdin: more than {} bytes; append the measurements in parts",
                                   max_input_bytes));
    }
    for (ssize_t i = 0; i < got; ++i) {
      if (buffer[i] == '\n') {
        take_line();
        continue;
      }
      pending += buffer[i];
      if (pending.size() > max_line_bytes) {
        throw UsageError(
            fmt::format("stdin line {}: longer than {} bytes; a measurement is one line of JSON",
                        line_number + 1, max_line_bytes));
      }
    }
  }
  if (!pending.empty()) take_line();  // a last line with no newline
  return lines;
}

struct InitArguments {
  bool init = false;
  std::string config_path;
  std::vector<std::string> overrides;
  std::string device = "cpu";
};

// A new results folder for measurements taken elsewhere: --init's flags checked, then stdin's
// description, the config and the path (make_producer_folder).
void init_folder(const std::string& path, const InitArguments& args) {
  if (args.config_path.empty()) throw UsageError("append --init needs --config CONFIG");
  if (args.device != "cpu" && args.device != "cuda")
    throw UsageError(fmt::format("--device {}: expected cpu or cuda", args.device));
  ProducerFolderRequest request;
  request.path = path;
  request.config_path = args.config_path;
  request.overrides = args.overrides;
  request.cuda = args.device == "cuda";
  for (const auto& [line_number, line] : read_measurement_lines())
    request.description_text += line + "\n";
  request.command = fmt::format("attnbench append --init {} --config {}", path, args.config_path);
  for (const std::string& assignment : args.overrides) request.command += " --set " + assignment;
  make_producer_folder(request);
  fmt::print("{}\n", path);
}

// Appends stdin's measurements to the folder, all or none, and prints each record as readers see
// it: rated against the folder's peak checks.
void append_measurements(const std::string& path) {
  RunFolder folder = RunFolder::open_existing(path);
  const auto own_variant = [](const std::string& variant) {
    return Registry::instance().find(variant) != nullptr;
  };
  const std::vector<nlohmann::ordered_json> records =
      records_from_lines(read_measurement_lines(), "stdin", folder, own_variant);
  for (const nlohmann::ordered_json& json : records) folder.append(json);
  if (!records.empty()) folder.write_summary_csv();
  for (const nlohmann::ordered_json& json : records)
    fmt::print("{}\n", rate_record(json, folder.peak_checks()).dump());
  std::fflush(stdout);
}

}  // namespace

void add_append_command(CLI::App& app, int& exit_code) {
  auto folder_path = std::make_shared<std::string>();
  auto init = std::make_shared<InitArguments>();
  CLI::App* append = app.add_subcommand(
      "append", "Append records of measurements taken elsewhere (JSON lines on stdin) to a run");
  append->add_option("folder", *folder_path, "An existing results folder (with manifest.json)")
      ->required();
  append->add_flag("--init", init->init,
                   "Make FOLDER, a new results folder, with the manifest a sweep of --config "
                   "writes (stdin: an optional JSON object describing the producer)");
  append->add_option("--config", init->config_path, "With --init: the sweep config (TOML)");
  append->add_option("--set", init->overrides, "With --init: override a config key (repeatable)");
  append->add_option("--device", init->device,
                     "With --init: cpu (default), or cuda (the GPU's peaks are measured too)");
  append->callback([folder_path, init, &exit_code] {
    if (init->init) {
      init_folder(*folder_path, *init);
      exit_code = 0;
      return;
    }
    if (!init->config_path.empty() || !init->overrides.empty())
      throw UsageError("--config and --set are for append --init");
    append_measurements(*folder_path);
    exit_code = 0;
  });
}

}  // namespace attnbench
