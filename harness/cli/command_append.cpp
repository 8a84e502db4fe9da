// attnbench append DIR: turns measurements taken outside attnbench (the PyTorch peer) into
// records, through the same record code as a sweep, and appends them to the results folder DIR.
// Reads one JSON object per line on stdin:
//   {"index", "variant", "device", the shape's fields (as `plan --json` prints them), "precision",
//    "status", "reason", "times_ms": [...], "workspace_bytes", "peak_gflops", "peak_name",
//    "oracle": {"max_abs_err", "rel_l2_err", "rel_l2_tolerance", "sampled"} | null, "threads",
//    "distribution", "isa"}
// and prints each record it appended, one per line, so no tool outside C++ computes GFLOP/s,
// bytes or percent of peak, or lists the record's fields.
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
#include "harness/measure/timing.h"
#include "harness/results/record_check.h"
#include "harness/results/run_folder.h"

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

CaseRecord record_from_measurement(const nlohmann::json& m) {
  if (!m.is_object()) throw BadMeasurement("a measurement must be a JSON object");
  CaseRecord r;
  r.the_case.index = present(m, "index")
                         ? integer_field(m["index"], "index", std::numeric_limits<int64_t>::max())
                         : 0;
  r.the_case.variant = text_field(m, "variant", "");
  if (r.the_case.variant.empty()) throw BadMeasurement("'variant' missing");
  // The variant heads the case id, whose fields '|' separates; a control character would break
  // the one-line records and messages.
  for (const char c : r.the_case.variant) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '|')
      throw BadMeasurement("'variant' holds '|' or a control character");
  }
  try {
    r.the_case.shape = shape_from_json(m);
  } catch (const std::runtime_error& error) {
    throw BadMeasurement(error.what());
  }
  r.the_case.id = case_id(r.the_case.variant, r.the_case.shape);

  const std::string device = text_field(m, "device", "cpu");
  if (device != "cpu" && device != "cuda")
    throw BadMeasurement(fmt::format("'device' is '{}', not cpu or cuda", device));
  r.device = device == "cuda" ? Device::cuda : Device::cpu;
  const std::string precision = text_field(m, "precision", "fp32");
  if (precision != "fp32" && precision != "tf32")
    throw BadMeasurement(fmt::format("'precision' is '{}', not fp32 or tf32", precision));
  r.precision = precision == "tf32" ? Precision::tf32 : Precision::fp32;
  // tf32 rounds fp32 inputs inside the variant; bf16 and fp16 tensors have no tf32 arithmetic.
  if (r.precision == Precision::tf32 && r.the_case.shape.dtype != DType::fp32) {
    throw BadMeasurement(fmt::format("'precision' tf32 is only for fp32 tensors, not {}",
                                     to_string(r.the_case.shape.dtype)));
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
  r.work = count_work(r.the_case.shape);
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
  r.isa = text_field(m, "isa", "");
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

}  // namespace

void add_append_command(CLI::App& app, int& exit_code) {
  auto folder_path = std::make_shared<std::string>();
  CLI::App* append = app.add_subcommand(
      "append", "Append records of measurements taken elsewhere (JSON lines on stdin) to a run");
  append->add_option("folder", *folder_path, "An existing results folder (with manifest.json)")
      ->required();
  append->callback([folder_path, &exit_code] {
    RunFolder folder = RunFolder::open_existing(*folder_path);
    const std::set<std::string> recorded = folder.finished_case_ids();
    // Every line is checked before the first is written.
    std::vector<nlohmann::ordered_json> records;
    std::set<std::string> input_ids;
    for (const auto& [line_number, line] : read_measurement_lines()) {
      try {
        const nlohmann::json measurement = nlohmann::json::parse(line);
        const nlohmann::ordered_json json = to_json(record_from_measurement(measurement));
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
