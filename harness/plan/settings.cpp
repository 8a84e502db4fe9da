#include "harness/plan/settings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <string_view>
#include <type_traits>

#include "harness/core/distribution.h"

namespace attnbench {

namespace {

std::vector<std::string> peaks_choices() { return {"measure", "skip"}; }

std::vector<std::string> distribution_names() {
  std::vector<std::string> names;
  for (Distribution distribution : all_distributions()) names.emplace_back(to_string(distribution));
  return names;
}

// Bounds are whole numbers or short decimals: 1000000, not 1e+06.
std::string format_bound(double value) {
  if (std::floor(value) == value && std::fabs(value) < 1e15)
    return fmt::to_string(static_cast<int64_t>(value));
  return fmt::to_string(value);
}

// "[0, 1000000]", "(0, 86400]", "> 0", "<= 5"; empty when unbounded.
std::string bounds_text(const SettingBounds& bounds) {
  const bool has_lowest = std::isfinite(bounds.lowest);
  const bool has_highest = std::isfinite(bounds.highest);
  if (has_lowest && has_highest) {
    return fmt::format("{}{}, {}{}", bounds.lowest_included ? '[' : '(',
                       format_bound(bounds.lowest), format_bound(bounds.highest),
                       bounds.highest_included ? ']' : ')');
  }
  if (has_lowest)
    return fmt::format("{} {}", bounds.lowest_included ? ">=" : ">", format_bound(bounds.lowest));
  if (has_highest) {
    return fmt::format("{} {}", bounds.highest_included ? "<=" : "<", format_bound(bounds.highest));
  }
  return {};
}

template <class Value>
constexpr const char* type_name_of() {
  if constexpr (std::is_same_v<Value, int64_t>) return "integer";
  if constexpr (std::is_same_v<Value, double>) return "number";
  if constexpr (std::is_same_v<Value, bool>) return "boolean";
  return "string";
}

}  // namespace

bool SettingBounds::contain(double value) const {
  const bool above_lowest = lowest_included ? value >= lowest : value > lowest;
  const bool below_highest = highest_included ? value <= highest : value < highest;
  return above_lowest && below_highest;
}

const std::vector<Setting>& settings() {
  using Bounds = SettingBounds;
  static const std::vector<Setting> table = {
      {"measure", "warmup", &TimingOptions::warmup_runs,
       Bounds::at_least(0).at_most(max_warmup_runs), nullptr,
       "untimed runs of each case before timing (cut short once they take case_budget_s)"},
      {"measure", "repetitions", &TimingOptions::repetitions,
       Bounds::at_least(1).at_most(max_repetitions), nullptr,
       "Google Benchmark repetitions of each case; with a target, the least there will be"},
      {"measure", "min_time_s", &TimingOptions::min_time_s, Bounds::above(0).at_most(max_seconds),
       nullptr, "seconds per repetition; Google Benchmark picks the iteration count"},
      {"measure", "case_budget_s", &TimingOptions::case_budget_s,
       Bounds::above(0).at_most(max_seconds), nullptr,
       "skip a case predicted (from the variant's smaller cases) to take longer; warm-up stops "
       "once it has taken this long"},
      {"measure", "memory_cap_gb", &MeasureConfig::memory_cap_gb, Bounds::above(0), nullptr,
       "skip a case whose workspace and tensors would exceed this many GiB"},
      {"measure",
       "cold",
       &TimingOptions::cold,
       {},
       nullptr,
       "before every timed run: on the CPU, write 64 MiB of other data, then evict it and the "
       "case's inputs and outputs from every cache level (clflushopt, clflush or dc civac); on a "
       "GPU, overwrite a buffer larger than its L2"},
      {"measure",
       "distribution",
       &MeasureConfig::distribution,
       {},
       distribution_names,
       "what the timed inputs are drawn from (each breaks kernels in its own way)"},
      {"measure",
       "seed",
       &MeasureConfig::seed,
       {},
       nullptr,
       "seeds every case's inputs (with its index; under interleave, with its shape's, so a group "
       "shares one set whichever of its cases a run selects) and the documents' lengths"},
      {"measure", "target_rel_ci", &TimingOptions::target_rel_ci, Bounds::at_least(0).below(1),
       nullptr,
       "add repetitions until the median's 95% interval is within this fraction of it (0.02: "
       "+-2%); 0: no target, exactly `repetitions`"},
      {"measure", "max_time_s", &TimingOptions::max_time_s, Bounds::above(0), nullptr,
       "with a target, stop adding repetitions once this many seconds of timed runs are spent"},
      {"measure",
       "interleave",
       &MeasureConfig::interleave,
       {},
       nullptr,
       "time the variants of each shape in alternating rounds (A B C A B C ...), so their ratios "
       "share the machine's noise"},
      {"measure", "peak_check_interval_s", &MeasureConfig::peak_check_interval_s,
       Bounds::at_least(0), nullptr,
       "re-measure the CPU peaks between variants once this long has passed (and always at the "
       "start and the end)"},
      {"measure",
       "peaks",
       &MeasureConfig::peaks,
       {},
       peaks_choices,
       "measure: check the CPU (and GPU) peaks at the start, between variants and at the end, "
       "each loop bounded by time; skip: no checks, and records carry no rating"},
      {"oracle", "full_check_max_n", &OracleOptions::full_check_max_n, Bounds::at_least(1), nullptr,
       "above this seq_q or seq_kv, compare sampled rows only"},
      // Each sampled row is compared in float64 and held in memory: a million is minutes.
      {"oracle", "sample_rows", &OracleOptions::sample_rows, Bounds::at_least(1).at_most(1000000),
       nullptr,
       "random (batch, head, row) triples compared when sampling, on top of every head's first and "
       "last row"},
  };
  return table;
}

std::vector<std::string> setting_sections() {
  std::vector<std::string> sections;
  for (const Setting& setting : settings()) {
    if (std::find(sections.begin(), sections.end(), setting.section) == sections.end())
      sections.emplace_back(setting.section);
  }
  return sections;
}

std::string dotted_name(const Setting& setting) {
  return fmt::format("{}.{}", setting.section, setting.name);
}

const char* type_name(const Setting& setting) {
  return std::visit(
      [](auto member) {
        return type_name_of<typename settings_detail::member_of<decltype(member)>::value>();
      },
      setting.field);
}

std::string allowed_values(const Setting& setting) {
  if (setting.choices != nullptr) return fmt::format("{}", fmt::join(setting.choices(), ", "));
  if (std::string_view(type_name(setting)) == "boolean") return "true, false";
  const std::string bounds = bounds_text(setting.bounds);
  return bounds.empty() ? "any" : bounds;
}

std::string expected_values(const Setting& setting) {
  if (setting.choices != nullptr)
    return fmt::format("one of {}", fmt::join(setting.choices(), ", "));
  const std::string_view type = type_name(setting);
  if (type == "boolean") return "true or false";
  const std::string bounds = bounds_text(setting.bounds);
  const char* article = type == "integer" ? "an" : "a";
  if (bounds.empty()) return fmt::format("{} {}", article, type);
  // An interval reads "in [0, 1]"; a one-sided bound reads "> 0".
  return fmt::format("{} {} {}{}", article, type, bounds[0] == '[' || bounds[0] == '(' ? "in " : "",
                     bounds);
}

nlohmann::ordered_json setting_value(const Setting& setting, const SweepConfig& config) {
  return visit_field(setting, config,
                     [](const auto& value) { return nlohmann::ordered_json(value); });
}

nlohmann::ordered_json default_value(const Setting& setting) {
  return setting_value(setting, SweepConfig{});
}

nlohmann::ordered_json settings_json(const SweepConfig& config) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const Setting& setting : settings()) {
    out[dotted_name(setting)] = {{"value", setting_value(setting, config)},
                                 {"default", default_value(setting)},
                                 {"type", type_name(setting)},
                                 {"allowed", allowed_values(setting)}};
  }
  return out;
}

}  // namespace attnbench
