// The scalar settings of a config ([measure], [oracle]) in one table: each key once, with the
// field its value lands in, the values it allows and what it means. Parsing, its error messages,
// `plan --json`'s settings block and the configuration reference are all read off this table;
// the defaults are the fields' own initial values.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "harness/plan/config.h"

namespace attnbench {

// The interval an integer or number setting must lie in; an infinite end is no limit.
struct SettingBounds {
  double lowest = -std::numeric_limits<double>::infinity();
  bool lowest_included = true;
  double highest = std::numeric_limits<double>::infinity();
  bool highest_included = true;

  static constexpr SettingBounds at_least(double value) { return {value, true}; }
  static constexpr SettingBounds above(double value) { return {value, false}; }
  constexpr SettingBounds at_most(double value) const {
    return {lowest, lowest_included, value, true};
  }
  constexpr SettingBounds below(double value) const {
    return {lowest, lowest_included, value, false};
  }
  bool contain(double value) const;
};

// Where a setting's value lives: a member of one of the parts of a SweepConfig. Its type is the
// setting's type (int64_t: integer, double: number, bool: boolean, std::string: one of names).
using SettingField =
    std::variant<int64_t TimingOptions::*, double TimingOptions::*, bool TimingOptions::*,
                 int64_t MeasureConfig::*, double MeasureConfig::*, bool MeasureConfig::*,
                 std::string MeasureConfig::*, int64_t OracleOptions::*>;

struct Setting {
  const char* section;  // the TOML table: "measure", "oracle"
  const char* name;
  SettingField field;
  SettingBounds bounds;                   // integer and number settings
  std::vector<std::string> (*choices)();  // string settings: the names allowed
  const char* meaning;
};

// Every scalar setting, by section, in the order the reference lists them.
const std::vector<Setting>& settings();

// The sections the settings are in, in table order: "measure", "oracle".
std::vector<std::string> setting_sections();

// "measure.warmup".
std::string dotted_name(const Setting& setting);

// "integer", "number", "boolean" or "string".
const char* type_name(const Setting& setting);

// The values allowed, as the reference shows them: "[0, 1000000]", "> 0", "true, false",
// "normal, large_scores, ...", "any".
std::string allowed_values(const Setting& setting);

// What a value must be, for error messages: "an integer in [0, 1000000]", "a number > 0",
// "true or false", "one of normal, large_scores, ...".
std::string expected_values(const Setting& setting);

namespace settings_detail {
template <class Member>
struct member_of;
template <class Value, class Owner>
struct member_of<Value Owner::*> {
  using owner = Owner;
  using value = Value;
};
template <class Config>
auto& part(Config& config, const TimingOptions*) {
  return config.timing;
}
template <class Config>
auto& part(Config& config, const MeasureConfig*) {
  return config.measure;
}
template <class Config>
auto& part(Config& config, const OracleOptions*) {
  return config.oracle;
}
}  // namespace settings_detail

// Calls `visit` with the setting's field in `config` (a const reference when config is const);
// every call of `visit` must return the same type.
template <class Config, class Visit>
decltype(auto) visit_field(const Setting& setting, Config& config, Visit&& visit) {
  return std::visit(
      [&](auto member) -> decltype(auto) {
        using Owner = typename settings_detail::member_of<decltype(member)>::owner;
        return visit(settings_detail::part(config, static_cast<const Owner*>(nullptr)).*member);
      },
      setting.field);
}

// The setting's value in `config`, and in a config that leaves it out.
nlohmann::ordered_json setting_value(const Setting& setting, const SweepConfig& config);
nlohmann::ordered_json default_value(const Setting& setting);

// {"measure.warmup": {"value", "default", "type", "allowed"}, ...} for every setting: the
// effective settings of `config`, for `plan --json`.
nlohmann::ordered_json settings_json(const SweepConfig& config);

}  // namespace attnbench
