#include "harness/results/measurement_records.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "harness/core/case_json.h"
#include "harness/core/distribution.h"
#include "harness/core/named_values.h"
#include "harness/measure/checked_run.h"
#include "harness/measure/inputs.h"
#include "harness/measure/oracle.h"
#include "harness/measure/timing.h"
#include "harness/plan/config.h"
#include "harness/results/json_file.h"
#include "harness/results/manifest.h"
#include "harness/results/npy_io.h"
#include "harness/results/record_check.h"

namespace attnbench {

namespace {

constexpr int64_t max_threads = int64_t{1} << 20;
constexpr int64_t max_integer = std::numeric_limits<int64_t>::max();

bool present(const nlohmann::json& m, const char* key) {
  return m.contains(key) && !m[key].is_null();
}

std::string text_field(const nlohmann::json& m, const char* key, const std::string& fallback) {
  if (!present(m, key)) return fallback;
  if (!m[key].is_string()) throw BadMeasurement(fmt::format("'{}' is not a string", key));
  return m[key].get<std::string>();
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

// A field naming one value of an enum (device, precision, status, distribution): the names are
// the enum's own, so the message lists exactly the values the schema takes.
template <class T>
T named_field(const nlohmann::json& m, const char* key, const std::string& fallback,
              const std::vector<T>& all) {
  const std::string name = text_field(m, key, fallback);
  if (const std::optional<T> value = value_named(all, name)) return *value;
  throw BadMeasurement(fmt::format("'{}' is '{}', not {}", key, name, names_of(all)));
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

// The case: its index, variant, shape and id.
Case case_of(const nlohmann::json& m) {
  Case c;
  c.index = present(m, "index") ? integer_field(m["index"], "index", max_integer) : 0;
  c.variant = text_field(m, "variant", "");
  if (c.variant.empty()) throw BadMeasurement("'variant' missing");
  // The variant heads the case id, whose fields '|' separates; a control character would break
  // the one-line records and messages.
  for (const char ch : c.variant) {
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f || ch == '|')
      throw BadMeasurement("'variant' holds '|' or a control character");
  }
  try {
    c.shape = shape_from_json(m);
  } catch (const std::runtime_error& error) {
    throw BadMeasurement(error.what());
  }
  c.id = case_id(c.variant, c.shape);
  return c;
}

// The times and, when the producer gives it, the stopping rule they were sampled under.
std::optional<TimingStats> timing_of(const nlohmann::json& m, CaseStatus status) {
  // No call is timed under a nanosecond; below it (5e-324 ms, say) the rates derived from a time
  // overflow, and a record stored with them could not be read back.
  constexpr double kShortestMs = 1e-6;
  std::vector<double> times;
  if (present(m, "times_ms")) {
    if (!m["times_ms"].is_array()) throw BadMeasurement("'times_ms' is not an array of numbers");
    for (const auto& time : m["times_ms"]) {
      if (!time.is_number()) throw BadMeasurement("'times_ms' holds a value that is not a number");
      const double ms = time.get<double>();
      if (!std::isfinite(ms) || ms < kShortestMs) {
        throw BadMeasurement(
            fmt::format("'times_ms' holds {}: every time must be a finite number of at least {} ms",
                        ms, kShortestMs));
      }
      times.push_back(ms);
    }
  }
  if (status == CaseStatus::ok && times.empty())
    throw BadMeasurement("an ok measurement needs 'times_ms'");
  if (status == CaseStatus::skipped && !times.empty())
    throw BadMeasurement("a skipped measurement has no 'times_ms': it was not timed");
  std::optional<TimingStats> timing;
  if (!times.empty()) timing = summarise(times);
  if (present(m, "target_rel_ci")) {
    // The stopping rule the producer sampled under (the peer takes the config's): the record
    // says, as a sweep's does, whether the median's interval reached it.
    const double target = non_negative_number(m["target_rel_ci"], "target_rel_ci");
    if (target >= 1)
      throw BadMeasurement(fmt::format("'target_rel_ci' is {}: it must be below 1", target));
    if (timing) {
      timing->target_rel_ci = target;
      timing->target_reached =
          target > 0 && timing->ci_valid && timing->rel_ci_half_width <= target;
    }
  }
  return timing;
}

// The producer's own oracle verdict, when it gives one.
std::optional<OracleReport> producer_oracle(const nlohmann::json& m, CaseStatus status) {
  if (!present(m, "oracle")) return std::nullopt;
  const auto& o = m["oracle"];
  if (!o.is_object()) throw BadMeasurement("'oracle' is not an object (or null)");
  OracleReport report;
  for (auto [key, target] :
       {std::pair{"max_abs_err", &report.max_abs_err}, std::pair{"rel_l2_err", &report.rel_l2_err},
        std::pair{"rel_l2_tolerance", &report.rel_l2_tolerance}}) {
    if (present(o, key)) *target = non_negative_number(o[key], std::string("oracle.") + key);
  }
  if (present(o, "sampled")) {
    if (!o["sampled"].is_boolean()) throw BadMeasurement("'oracle.sampled' is not true/false");
    report.sampled = o["sampled"].get<bool>();
  }
  report.passed = status != CaseStatus::failed;
  return report;
}

// What the record says of the run itself: workspace, peak, threads, distribution, code path.
void read_run_facts(const nlohmann::json& m, CaseRecord& r) {
  if (present(m, "workspace_bytes")) {
    r.workspace_bytes = static_cast<std::size_t>(
        integer_field(m["workspace_bytes"], "workspace_bytes", max_integer));
  }
  r.peak_gflops =
      present(m, "peak_gflops") ? non_negative_number(m["peak_gflops"], "peak_gflops") : 0;
  r.peak_name = text_field(m, "peak_name", "");
  r.threads = present(m, "threads")
                  ? static_cast<int>(integer_field(m["threads"], "threads", max_threads))
                  : 0;
  r.distribution = to_string(named_field(m, "distribution", "normal", all_distributions()));
  r.code_path = present(m, "code_path") ? text_field(m, "code_path", "") : text_field(m, "isa", "");
}

// The oracle's verdict on the producer's output replaces the producer's word; a failed check
// fails the record.
void check_producer_output(const nlohmann::json& m, const RunFolder& folder, CaseRecord& r) {
  if (present(m, "oracle")) throw BadMeasurement("give 'output' or 'oracle', not both");
  if (r.status == CaseStatus::skipped)
    throw BadMeasurement("a skipped measurement has no 'output' to check");
  r.oracle = check_output(m, r, folder);
  if (!r.oracle->passed) {
    r.status = CaseStatus::failed;
    r.reason = "oracle: " + r.oracle->failure + (r.reason.empty() ? "" : "; " + r.reason);
  }
}

}  // namespace

std::string escaped_controls(const std::string& text) {
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

double non_negative_number(const nlohmann::json& value, const std::string& key) {
  if (!value.is_number()) throw BadMeasurement(fmt::format("'{}' is not a number", key));
  const double number = value.get<double>();
  if (!std::isfinite(number) || number < 0)
    throw BadMeasurement(
        fmt::format("'{}' must be a finite number, 0 or more, got {}", key, number));
  return number;
}

CaseRecord record_from_measurement(const nlohmann::json& m, const RunFolder& folder,
                                   const OwnVariant& own_variant) {
  if (!m.is_object()) throw BadMeasurement("a measurement must be a JSON object");
  CaseRecord r;
  r.sweep_case = case_of(m);
  r.device = named_field(m, "device", "cpu", all_devices());
  r.precision = named_field(m, "precision", "fp32", all_precisions());
  // tf32 rounds fp32 inputs inside the variant; bf16 and fp16 tensors have no tf32 arithmetic.
  if (r.precision == Precision::tf32 && r.sweep_case.shape.dtype != DType::fp32) {
    throw BadMeasurement(fmt::format("'precision' tf32 is only for fp32 tensors, not {}",
                                     to_string(r.sweep_case.shape.dtype)));
  }
  r.status = named_field(m, "status", "ok", all_case_statuses());
  r.reason = text_field(m, "reason", "");
  // Tables, plots and summary.csv print the reason as written: an escape sequence in it would
  // reach the reader's terminal, a newline would break the one-line records' readers.
  if (std::any_of(r.reason.begin(), r.reason.end(),
                  [](char ch) { return static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f; }))
    throw BadMeasurement("'reason' holds a control character");
  r.timing = timing_of(m, r.status);
  r.oracle = producer_oracle(m, r.status);
  r.work = count_work(r.sweep_case.shape);
  read_run_facts(m, r);
  // A record of one of this binary's own variants is the harness's to make (`run`, whose oracle
  // checked it) or carries an output append's oracle checks: taken on the producer's word, a
  // resumed run would count its case done, and its time would steer the case-budget predictor.
  if (own_variant(r.sweep_case.variant) && !present(m, "output")) {
    throw BadMeasurement(fmt::format(
        "'variant' {} is one of attnbench's own: its records come from `attnbench run`, or give "
        "'output' for the oracle to check",
        r.sweep_case.variant));
  }
  if (present(m, "output")) check_producer_output(m, folder, r);
  return r;
}

std::vector<nlohmann::ordered_json> records_from_lines(
    const std::vector<std::pair<int64_t, std::string>>& lines, const std::string& source,
    const RunFolder& folder, const OwnVariant& own_variant) {
  const std::set<std::string> recorded = folder.finished_case_ids();
  std::vector<nlohmann::ordered_json> records;
  std::set<std::string> input_ids;
  for (const auto& [line_number, line] : lines) {
    const auto refuse = [&, line_number = line_number](const std::string& problem) {
      return std::invalid_argument(fmt::format("{} line {}: {}", source, line_number, problem));
    };
    try {
      const nlohmann::json measurement = parse_json_within_depth<nlohmann::json>(line);
      const nlohmann::ordered_json json =
          to_json(record_from_measurement(measurement, folder, own_variant));
      if (const std::string problem = record_schema_problem(json); !problem.empty())
        throw BadMeasurement(problem);
      const std::string id = json.at("case_id").get<std::string>();
      if (recorded.count(id) > 0)
        throw BadMeasurement(fmt::format("case {} is already recorded in {}", id, folder.path()));
      if (!input_ids.insert(id).second)
        throw BadMeasurement(fmt::format("case {} is given twice in the input", id));
      records.push_back(json);
    } catch (const nlohmann::json::parse_error& error) {
      throw refuse(fmt::format("not valid JSON (at byte {})", error.byte));
    } catch (const nlohmann::json::exception& error) {  // a number past a double's range, a type
      throw refuse(escaped_controls(json_syntax_problem(error)));
    } catch (const std::runtime_error& error) {  // JsonTooDeep, BadMeasurement
      throw refuse(escaped_controls(error.what()));
    }
  }
  return records;
}

}  // namespace attnbench
