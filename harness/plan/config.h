// A sweep config: TOML on disk, validated into a SweepConfig. Every error names the key and the
// line it came from, so a typo never silently changes what gets measured.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/core/oracle_options.h"
#include "harness/core/timing_options.h"
#include "harness/plan/axes.h"

namespace attnbench {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Limits on what a config may ask for: beyond them a value is a typo, and would hang the run
// or overflow the counters it drives.
inline constexpr int64_t max_warmup_runs = 1000000;
inline constexpr int64_t max_repetitions = 100000;
inline constexpr double max_seconds = 86400;  // min_time_s, case_budget_s
inline constexpr size_t max_axis_length = 10000;
inline constexpr long max_config_bytes = 1 << 20;

// The [measure] settings the sweep reads itself; those of timing one case are a TimingOptions.
struct MeasureConfig {
  double memory_cap_gb = 8;  // skip a case whose workspace and tensors would exceed this
  std::string distribution = "normal";
  int64_t seed = 42;
  // Time the variants of each shape in alternating rounds (A B C A B C ...), `repetitions`
  // rounds at least, so their ratios share the machine's noise.
  bool interleave = false;
  // Re-measure the CPU peaks between variants once this long has passed since the last check
  // (they are always measured at the start and the end).
  double peak_check_interval_s = 60;
  // "measure": peak checks at the start, between variants and at the end; "skip": none, and no
  // record is rated (for runs that do not read "% of peak", such as tests of other things).
  std::string peaks = "measure";
};

struct SweepConfig {
  std::string name;
  std::vector<std::string> variants;  // names, or the groups "cpu", "cuda", "all"
  AxesConfig axes;  // each axis given, or defaulted, by the axes table (axes_table.h)
  // The scalar settings, each read through the table in harness/plan/settings.cpp.
  TimingOptions timing;  // [measure]: how each case is timed
  MeasureConfig measure;
  OracleOptions oracle;
  std::string source_text;             // the file as given
  std::vector<std::string> overrides;  // --set key=value, applied after the file
  nlohmann::ordered_json as_json;      // the effective config, for the manifest
};

// Parses and validates; `overrides` are "dotted.key=toml-value" strings (from --set).
// Throws ConfigError with a one-line message.
SweepConfig load_config(const std::string& path, const std::vector<std::string>& overrides = {});
SweepConfig parse_config(const std::string& text, const std::string& source_name,
                         const std::vector<std::string>& overrides = {});

}  // namespace attnbench
