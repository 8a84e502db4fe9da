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
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "harness/cli/commands.h"
#include "harness/core/case_json.h"
#include "harness/core/distribution.h"
#include "harness/core/record.h"
#include "harness/measure/checked_run.h"
#include "harness/measure/inputs.h"
#include "harness/measure/oracle.h"
#include "harness/measure/timing.h"
#include "harness/plan/config.h"
#include "harness/results/manifest.h"
#include "harness/results/npy_io.h"
#include "harness/results/record_check.h"
#include "harness/results/run_folder.h"
#include "harness/variant/registry.h"

namespace attnbench {

namespace {

constexpr std::size_t max_line_bytes = std::size_t{1} << 20;   // one measurement
constexpr std::size_t max_input_bytes = std::size_t{1} << 28;  // all of them, checked together
constexpr int64_t max_threads = int64_t{1} << 20;

// The problem with one measurement, thrown as its line's error.
class BadMeasurement : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A message echoes values from the input: its control characters are written as escapes, so the
// error stays one line.
std::string one_line(const std::string& text) {
  std::string line;
  for (const char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      line += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      line += c;
    }
  }
  return line;
}

bool present(const nlohmann::json& m, const char* key) {
  return m.contains(key) && !m[key].is_null();
}

std::string text_field(const nlohmann::json& m, const char* key, const std::string& fallback) {
  if (!present(m, key)) return fallback;
  if (!m[key].is_string()) throw BadMeasurement(fmt::format("'{}' is not a string", key));
  return m[key].get<std::string>();
}

// A number that must be finite and at least zero (JSON has no NaN, but a number past double's
// range can still read as infinity).
double non_negative_number(const nlohmann::json& value, const std::string& key) {
  if (!value.is_number()) throw BadMeasurement(fmt::format("'{}' is not a number", key));
  const double number = value.get<double>();
  if (!std::isfinite(number) || number < 0)
    throw BadMeasurement(
        fmt::format("'{}' must be a finite number, 0 or more, got {}", key, number));
  return number;
}

// An integer in [0, highest] (a JSON integer: 1.5 and "1" are not).
int64_t integer_field(const nlohmann::json& value, const std::string& key, int64_t highest) {
  if (!value.is_number_integer()) throw BadMeasurement(fmt::format("'{}' is not an integer", key));
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(highest))
    throw BadMeasurement(
        fmt::format("'{}' must be at most {}, got {}", key, highest, value.dump()));
  const int64_t number = value.get<int64_t>();
  if (number < 0 || number > highest)
    throw BadMeasurement(
        fmt::format("'{}' must be between 0 and {}, got {}", key, highest, number));
  return number;
}

// A seed as `plan --json` prints it: a JSON integer from 0 to 2^64 - 1.
uint64_t seed_field(const nlohmann::json& m) {
  if (!present(m, "seed"))
    throw BadMeasurement("'output' needs the 'seed' its inputs were drawn from");
  const auto& seed = m["seed"];
  if (!seed.is_number_integer() || (!seed.is_number_unsigned() && seed.get<int64_t>() < 0))
    throw BadMeasurement("'seed' is not an integer from 0 to 2^64 - 1");
  return seed.get<uint64_t>();
}

// The oracle on a producer's output: the inputs drawn again from the measurement's seed, the
// tolerance and sampling from the folder's config.
OracleReport check_output(const nlohmann::json& m, const CaseRecord& r, const RunFolder& folder) {
  const uint64_t seed = seed_field(m);
  const std::string path = text_field(m, "output", "");
  const Shape& s = r.sweep_case.shape;
  const SweepConfig config =
      config_from_manifest(folder.manifest(), folder.path() + "/manifest.json");
  const NpyTensor o = load_npy(path);
  const std::vector<int64_t> expected{s.batch, s.heads, s.seq_q, s.d_v};
  if (o.shape != expected) {
    throw BadMeasurement(fmt::format("'output' {} is [{}], the case's output is [{}]", path,
                                     fmt::join(o.shape, ", "), fmt::join(expected, ", ")));
  }
  // Drawn as `attnbench prepare` drew them for the producer: from the folder's distribution.
  if (r.distribution != config.measure.distribution) {
    throw BadMeasurement(fmt::format("'distribution' is '{}' but the folder's inputs are drawn {}",
                                     r.distribution, config.measure.distribution));
  }
  const HostTensors inputs = make_inputs(s, *parse_distribution(r.distribution), seed);
  return check_against_reference(inputs, default_scale(s), o.data, nullptr, r.precision,
                                 config.oracle);
}

CaseRecord record_from_measurement(const nlohmann::json& m, const RunFolder& folder) {
  if (!m.is_object()) throw BadMeasurement("a measurement must be a JSON object");
  CaseRecord r;
  r.sweep_case.index = present(m, "index")
                           ? integer_field(m["index"], "index", std::numeric_limits<int64_t>::max())
                           : 0;
  r.sweep_case.variant = text_field(m, "variant", "");
  if (r.sweep_case.variant.empty()) throw BadMeasurement("'variant' missing");
  // The variant heads the case id, whose fields '|' separates; a control character would break
  // the one-line records and messages.
  for (const char c : r.sweep_case.variant) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '|')
      throw BadMeasurement("'variant' holds '|' or a control character");
  }
  try {
    r.sweep_case.shape = shape_from_json(m);
  } catch (const std::runtime_error& error) {
    throw BadMeasurement(error.what());
  }
  r.sweep_case.id = case_id(r.sweep_case.variant, r.sweep_case.shape);

  const std::string device = text_field(m, "device", "cpu");
  if (device != "cpu" && device != "cuda")
    throw BadMeasurement(fmt::format("'device' is '{}', not cpu or cuda", device));
  r.device = device == "cuda" ? Device::cuda : Device::cpu;
  const std::string precision = text_field(m, "precision", "fp32");
  if (precision != "fp32" && precision != "tf32")
    throw BadMeasurement(fmt::format("'precision' is '{}', not fp32 or tf32", precision));
  r.precision = precision == "tf32" ? Precision::tf32 : Precision::fp32;
  // tf32 rounds fp32 inputs inside the variant; bf16 and fp16 tensors have no tf32 arithmetic.
  if (r.precision == Precision::tf32 && r.sweep_case.shape.dtype != DType::fp32) {
    throw BadMeasurement(fmt::format("'precision' tf32 is only for fp32 tensors, not {}",
                                     to_string(r.sweep_case.shape.dtype)));
  }

  const std::string status = text_field(m, "status", "ok");
  if (status == "ok") {
    r.status = CaseStatus::ok;
  } else if (status == "skipped") {
    r.status = CaseStatus::skipped;
  } else if (status == "failed") {
    r.status = CaseStatus::failed;
  } else {
    throw BadMeasurement(fmt::format("'status' is '{}', not ok, skipped or failed", status));
  }
  r.reason = text_field(m, "reason", "");

  std::vector<double> times;
  if (present(m, "times_ms")) {
    if (!m["times_ms"].is_array()) throw BadMeasurement("'times_ms' is not an array of numbers");
    for (const auto& time : m["times_ms"]) {
      if (!time.is_number()) throw BadMeasurement("'times_ms' holds a value that is not a number");
      const double ms = time.get<double>();
      if (!std::isfinite(ms) || ms <= 0) {
        throw BadMeasurement(
            fmt::format("'times_ms' holds {}: every time must be a finite number above 0", ms));
      }
      times.push_back(ms);
    }
  }
  if (r.status == CaseStatus::ok && times.empty())
    throw BadMeasurement("an ok measurement needs 'times_ms'");
  if (!times.empty()) r.timing = summarise(times);
  if (present(m, "target_rel_ci")) {
    // The stopping rule the producer sampled under (the peer takes the config's): the record
    // says, as a sweep's does, whether the median's interval reached it.
    const double target = non_negative_number(m["target_rel_ci"], "target_rel_ci");
    if (target >= 1)
      throw BadMeasurement(fmt::format("'target_rel_ci' is {}: it must be below 1", target));
    if (r.timing) {
      r.timing->target_rel_ci = target;
      r.timing->target_reached =
          target > 0 && r.timing->ci_valid && r.timing->rel_ci_half_width <= target;
    }
  }

  if (present(m, "oracle")) {
    const auto& o = m["oracle"];
    if (!o.is_object()) throw BadMeasurement("'oracle' is not an object (or null)");
    OracleReport report;
    for (auto [key, target] : {std::pair{"max_abs_err", &report.max_abs_err},
                               std::pair{"rel_l2_err", &report.rel_l2_err},
                               std::pair{"rel_l2_tolerance", &report.rel_l2_tolerance}}) {
      if (present(o, key)) *target = non_negative_number(o[key], std::string("oracle.") + key);
    }
    if (present(o, "sampled")) {
      if (!o["sampled"].is_boolean()) throw BadMeasurement("'oracle.sampled' is not true/false");
      report.sampled = o["sampled"].get<bool>();
    }
    report.passed = r.status != CaseStatus::failed;
    r.oracle = report;
  }
  r.work = count_work(r.sweep_case.shape);
  if (present(m, "workspace_bytes")) {
    r.workspace_bytes = static_cast<std::size_t>(integer_field(
        m["workspace_bytes"], "workspace_bytes", std::numeric_limits<int64_t>::max()));
  }
  r.peak_gflops =
      present(m, "peak_gflops") ? non_negative_number(m["peak_gflops"], "peak_gflops") : 0;
  r.peak_name = text_field(m, "peak_name", "");
  r.threads = present(m, "threads")
                  ? static_cast<int>(integer_field(m["threads"], "threads", max_threads))
                  : 0;
  r.distribution = text_field(m, "distribution", "normal");
  if (!parse_distribution(r.distribution)) {
    throw BadMeasurement(fmt::format(
        "'distribution' is '{}', not normal, large_scores, near_constant or dominant_key",
        r.distribution));
  }
  r.code_path = present(m, "code_path") ? text_field(m, "code_path", "") : text_field(m, "isa", "");
  // A record of one of this binary's own variants is the harness's to make (`run`, whose oracle
  // checked it) or carries an output append's oracle checks: taken on the producer's word, a
  // resumed run would count its case done, and its time would steer the case-budget predictor.
  if (Registry::instance().find(r.sweep_case.variant) != nullptr && !present(m, "output")) {
    throw BadMeasurement(fmt::format(
        "'variant' {} is one of attnbench's own: its records come from `attnbench run`, or give "
        "'output' for the oracle to check",
        r.sweep_case.variant));
  }
  if (present(m, "output")) {
    if (present(m, "oracle")) throw BadMeasurement("give 'output' or 'oracle', not both");
    if (r.status == CaseStatus::skipped)
      throw BadMeasurement("a skipped measurement has no 'output' to check");
    r.oracle = check_output(m, r, folder);
    if (!r.oracle->passed) {
      r.status = CaseStatus::failed;
      r.reason = "oracle: " + r.oracle->failure + (r.reason.empty() ? "" : "; " + r.reason);
    }
  }
  return r;
}

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

// The producer's description on stdin, checked: {"name", "peaks", "peer"}, each optional.
nlohmann::ordered_json read_producer_description() {
  std::string text;
  for (const auto& [line_number, line] : read_measurement_lines()) text += line + "\n";
  if (text.empty()) return nlohmann::ordered_json::object();
  nlohmann::ordered_json description;
  try {
    description = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    throw UsageError(fmt::format("stdin: not valid JSON (at byte {})", error.byte));
  }
  if (!description.is_object()) throw UsageError("stdin: the description must be a JSON object");
  for (const auto& [key, value] : description.items()) {
    if (key != "name" && key != "peaks" && key != "peer")
      throw UsageError(
          fmt::format("stdin: unknown key '{}' (known: name, peaks, peer)", one_line(key)));
  }
  if (description.contains("name") &&
      (!description["name"].is_string() || description["name"].get<std::string>().empty()))
    throw UsageError("stdin: 'name' must be a non-empty string");
  if (description.contains("peaks")) {
    if (!description["peaks"].is_object()) throw UsageError("stdin: 'peaks' must be an object");
    for (const auto& [name, gflops] : description["peaks"].items()) {
      try {
        non_negative_number(gflops, "peaks." + name);
      } catch (const BadMeasurement& error) {
        throw UsageError(fmt::format("stdin: {}", one_line(error.what())));
      }
    }
  }
  return description;
}

// A new results folder for measurements taken elsewhere, with the manifest a sweep of CONFIG
// would write. The config and the description are checked before anything is made; a folder
// that exists and holds anything is refused, so nothing is overwritten.
void init_folder(const std::string& path, const InitArguments& args) {
  if (args.config_path.empty()) throw UsageError("append --init needs --config CONFIG");
  if (args.device != "cpu" && args.device != "cuda")
    throw UsageError(fmt::format("--device {}: expected cpu or cuda", args.device));
  const nlohmann::ordered_json description = read_producer_description();
  const SweepConfig config = load_config(args.config_path, args.overrides);
  std::error_code error;
  if (std::filesystem::exists(path, error) &&
      (!std::filesystem::is_directory(path, error) || !std::filesystem::is_empty(path, error)))
    throw UsageError(
        fmt::format("{}: already exists and is not an empty folder; choose another", path));
  std::string command =
      fmt::format("attnbench append --init {} --config {}", path, args.config_path);
  for (const std::string& assignment : args.overrides) command += " --set " + assignment;
  MeasuredPeaks peaks;
  PeakCheck start;
  nlohmann::ordered_json manifest =
      make_manifest(config, command, "", args.device == "cuda", peaks, start);
  if (description.contains("name")) manifest["name"] = description["name"];
  if (description.contains("peaks")) {
    for (const auto& [name, gflops] : description["peaks"].items()) {
      if (manifest["peaks"].contains(name))
        throw UsageError(
            fmt::format("stdin: peak '{}' is one the harness measures", one_line(name)));
      manifest["peaks"][name] = gflops;
    }
  }
  manifest["peer"] = description.value("peer", nlohmann::ordered_json(nullptr));
  RunFolder folder = RunFolder::create(path, manifest);
  folder.append_peak_check(start);
  fmt::print("{}\n", path);
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
    RunFolder folder = RunFolder::open_existing(*folder_path);
    const std::set<std::string> recorded = folder.finished_case_ids();
    // Every line is checked before the first is written.
    std::vector<nlohmann::ordered_json> records;
    std::set<std::string> input_ids;
    for (const auto& [line_number, line] : read_measurement_lines()) {
      try {
        const nlohmann::json measurement = nlohmann::json::parse(line);
        const nlohmann::ordered_json json = to_json(record_from_measurement(measurement, folder));
        if (const std::string problem = record_schema_problem(json); !problem.empty())
          throw BadMeasurement(problem);
        const std::string id = json.at("case_id").get<std::string>();
        if (recorded.count(id) > 0)
          throw BadMeasurement(fmt::format("case {} is already recorded in {}", id, folder.path()));
        if (!input_ids.insert(id).second)
          throw BadMeasurement(fmt::format("case {} is given twice in the input", id));
        records.push_back(json);
      } catch (const nlohmann::json::parse_error& error) {
        throw UsageError(
            fmt::format("stdin line {}: not valid JSON (at byte {})", line_number, error.byte));
      } catch (const nlohmann::json::exception& error) {
        throw UsageError(fmt::format("stdin line {}: {}", line_number, one_line(error.what())));
      } catch (const std::runtime_error& error) {
        throw UsageError(fmt::format("stdin line {}: {}", line_number, one_line(error.what())));
      }
    }
    for (const nlohmann::ordered_json& json : records) folder.append(json);
    if (!records.empty()) folder.write_summary_csv();
    // Each record as readers see it: rated against the folder's peak checks.
    for (const nlohmann::ordered_json& json : records)
      fmt::print("{}\n", rate_record(json, folder.peak_checks()).dump());
    std::fflush(stdout);
    exit_code = 0;
  });
}

}  // namespace attnbench
