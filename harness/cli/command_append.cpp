// attnbench append DIR: turns measurements taken outside attnbench (the PyTorch peer) into
// records, through the same record code as a sweep, and appends them to the results folder DIR.
// Reads one JSON object per line on stdin:
//   {"index", "variant", "device", the shape's fields (as `plan --json` prints them), "precision",
//    "status", "reason", "times_ms": [...], "workspace_bytes", "peak_gflops", "peak_name",
//    "oracle": {"max_abs_err", "rel_l2_err", "rel_l2_tolerance", "sampled"} | null, "threads",
//    "distribution", "isa"}
// and prints each record it appended, one per line, so no tool outside C++ computes GFLOP/s,
// bytes or percent of peak, or lists the record's fields.
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "harness/cli/commands.h"
#include "harness/core/case_json.h"
#include "harness/core/record.h"
#include "harness/measure/timing.h"
#include "harness/results/run_folder.h"

namespace attnbench {

namespace {

template <class T>
T value_or(const nlohmann::json& object, const char* key, T fallback) {
  if (!object.contains(key) || object[key].is_null()) return fallback;
  return object[key].get<T>();
}

CaseRecord record_from_measurement(const nlohmann::json& m) {
  CaseRecord r;
  r.the_case.index = value_or<int64_t>(m, "index", 0);
  r.the_case.variant = value_or<std::string>(m, "variant", "");
  if (r.the_case.variant.empty()) throw std::runtime_error("'variant' missing");
  r.the_case.shape = shape_from_json(m);
  r.the_case.id = case_id(r.the_case.variant, r.the_case.shape);
  r.device = value_or<std::string>(m, "device", "cpu") == "cuda" ? Device::cuda : Device::cpu;
  r.precision =
      value_or<std::string>(m, "precision", "fp32") == "tf32" ? Precision::tf32 : Precision::fp32;
  const std::string status = value_or<std::string>(m, "status", "ok");
  if (status == "ok") {
    r.status = CaseStatus::ok;
  } else if (status == "skipped") {
    r.status = CaseStatus::skipped;
  } else if (status == "failed") {
    r.status = CaseStatus::failed;
  } else {
    throw std::runtime_error(fmt::format("'status' is '{}', not ok, skipped or failed", status));
  }
  r.reason = value_or<std::string>(m, "reason", "");
  const auto times = value_or<std::vector<double>>(m, "times_ms", {});
  if (r.status == CaseStatus::ok && times.empty())
    throw std::runtime_error("an ok measurement needs 'times_ms'");
  if (!times.empty()) r.timing = summarise(times);
  if (m.contains("oracle") && m["oracle"].is_object()) {
    const auto& o = m["oracle"];
    OracleReport report;
    report.max_abs_err = value_or<double>(o, "max_abs_err", 0);
    report.rel_l2_err = value_or<double>(o, "rel_l2_err", 0);
    report.rel_l2_tolerance = value_or<double>(o, "rel_l2_tolerance", 0);
    report.sampled = value_or<bool>(o, "sampled", false);
    report.passed = r.status != CaseStatus::failed;
    r.oracle = report;
  }
  r.work = count_work(r.the_case.shape);
  if (m.contains("workspace_bytes") && m["workspace_bytes"].is_number_integer())
    r.workspace_bytes = m["workspace_bytes"].get<std::size_t>();
  r.peak_gflops = value_or<double>(m, "peak_gflops", 0);
  r.peak_name = value_or<std::string>(m, "peak_name", "");
  r.threads = value_or<int>(m, "threads", 0);
  r.distribution = value_or<std::string>(m, "distribution", "normal");
  r.isa = value_or<std::string>(m, "isa", "");
  return r;
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
    std::string line;
    int64_t line_number = 0;
    while (std::getline(std::cin, line)) {
      ++line_number;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      CaseRecord record;
      try {
        record = record_from_measurement(nlohmann::json::parse(line));
      } catch (const std::exception& error) {
        throw UsageError(fmt::format("stdin line {}: {}", line_number, error.what()));
      }
      const nlohmann::ordered_json json = to_json(record);
      folder.append(json);
      folder.write_summary_csv();
      fmt::print("{}\n", rate_record(json, folder.peak_checks()).dump());
      std::fflush(stdout);
    }
    exit_code = 0;
  });
}

}  // namespace attnbench
