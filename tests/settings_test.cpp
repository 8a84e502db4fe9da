// The settings table drives parsing: every entry takes its default and the values its bounds or
// names allow, refuses every other value with one line naming file, line, key and what it takes,
// and its value reaches `plan --json`'s settings block. The described [axes] keys are the ones
// the parser knows, and their stated defaults mean what leaving them out means.
#include "harness/plan/settings.h"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>

#include "harness/plan/config_keys.h"
#include "harness/plan/sweep.h"

namespace attnbench {
namespace {

const std::string minimal = "name = \"t\"\nvariants = [\"naive\"]\n[axes]\nseq_len = [64]\n";
constexpr int setting_line = 6;  // the line after "[section]" following `minimal`

std::string config_error(const std::string& text) {
  try {
    parse_config(text, "test.toml");
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "no error";
}

// `minimal` with one setting given as `toml_value`.
std::string with_setting(const Setting& setting, const std::string& toml_value) {
  return fmt::format("{}[{}]\n{} = {}\n", minimal, setting.section, setting.name, toml_value);
}

// A JSON scalar as TOML writes it.
std::string toml_text(const nlohmann::ordered_json& value) {
  if (value.is_number_float()) return fmt::to_string(value.get<double>());
  return value.dump();
}

std::string type_of(const Setting& setting) { return type_name(setting); }

// A number as TOML writes it for the setting: 1000000, not 1e+06, for an integer.
std::string number_text(const Setting& setting, double value) {
  if (type_of(setting) == "integer") return fmt::to_string(static_cast<int64_t>(value));
  return fmt::to_string(value);
}

// Values of the wrong type, as TOML, for each type.
std::vector<std::string> wrong_types(const Setting& setting) {
  const std::string type = type_of(setting);
  if (type == "integer") return {"\"abc\"", "1.5", "true", "[1]"};
  if (type == "number") return {"\"abc\"", "true", "nan", "inf", "-inf", "[1]"};
  if (type == "boolean") return {"1", "\"yes\"", "[true]"};
  return {"1", "true", "[\"normal\"]"};
}

// Values of the right type just outside the bounds (or not among the names), as TOML.
std::vector<std::string> out_of_range(const Setting& setting) {
  const std::string type = type_of(setting);
  const SettingBounds& bounds = setting.bounds;
  std::vector<std::string> values;
  if (type == "integer" || type == "number") {
    const double step = type == "integer" ? 1 : 0.5;
    if (std::isfinite(bounds.lowest)) {
      values.push_back(
          number_text(setting, bounds.lowest_included ? bounds.lowest - step : bounds.lowest));
    }
    if (std::isfinite(bounds.highest)) {
      values.push_back(
          number_text(setting, bounds.highest_included ? bounds.highest + step : bounds.highest));
    }
  }
  if (setting.choices != nullptr) values.emplace_back("\"no_such_name\"");
  return values;
}

// A value the setting allows other than its default, as TOML.
std::string other_allowed_value(const Setting& setting) {
  const nlohmann::ordered_json fallback = default_value(setting);
  const std::string type = type_of(setting);
  if (type == "boolean") return fallback.get<bool>() ? "false" : "true";
  if (setting.choices != nullptr) return nlohmann::ordered_json(setting.choices().back()).dump();
  const double value = fallback.get<double>();
  for (double candidate : {value + 1, value - 1, value + 0.25})
    if (setting.bounds.contain(candidate) && number_text(setting, candidate) != toml_text(fallback))
      return number_text(setting, candidate);
  FAIL("no other value allowed for " << dotted_name(setting));
  return {};
}

TEST_CASE("every setting takes its default back, and the values at its bounds", "[settings]") {
  std::string all_defaults = minimal;
  for (const std::string& section : setting_sections()) {
    all_defaults += fmt::format("[{}]\n", section);
    for (const Setting& setting : settings()) {
      if (setting.section == section)
        all_defaults += fmt::format("{} = {}\n", setting.name, toml_text(default_value(setting)));
    }
  }
  const SweepConfig config = parse_config(all_defaults, "test.toml");
  for (const Setting& setting : settings()) {
    INFO(dotted_name(setting));
    CHECK(setting_value(setting, config) == default_value(setting));
    const SettingBounds& bounds = setting.bounds;
    if (std::isfinite(bounds.lowest) && bounds.lowest_included)
      CHECK(config_error(with_setting(setting, number_text(setting, bounds.lowest))) == "no error");
    if (std::isfinite(bounds.highest) && bounds.highest_included)
      CHECK(config_error(with_setting(setting, number_text(setting, bounds.highest))) ==
            "no error");
  }
}

TEST_CASE("every setting refuses other types and values with one line saying what it takes",
          "[settings]") {
  for (const Setting& setting : settings()) {
    std::vector<std::string> refused = wrong_types(setting);
    for (const std::string& value : out_of_range(setting)) refused.push_back(value);
    CHECK_FALSE(refused.empty());
    for (const std::string& value : refused) {
      INFO(dotted_name(setting) << " = " << value);
      const std::string error = config_error(with_setting(setting, value));
      CHECK(error == fmt::format("test.toml:{}: {}: must be {}, got {}", setting_line,
                                 dotted_name(setting), expected_values(setting), value));
      CHECK(error.find('\n') == std::string::npos);
    }
  }
  // The message's words, pinned for one entry of each kind.
  const auto find = [](const std::string& name) {
    for (const Setting& setting : settings())
      if (dotted_name(setting) == name) return setting;
    FAIL("no setting " << name);
    return settings().front();
  };
  CHECK(expected_values(find("measure.warmup")) == "an integer in [0, 1000000]");
  CHECK(expected_values(find("measure.memory_cap_gb")) == "a number > 0");
  CHECK(expected_values(find("measure.target_rel_ci")) == "a number in [0, 1)");
  CHECK(expected_values(find("measure.seed")) == "an integer");
  CHECK(expected_values(find("measure.cold")) == "true or false");
  CHECK(expected_values(find("oracle.sample_rows")) == "an integer in [1, 1000000]");
}

TEST_CASE("an unknown key in a settings section lists the table's keys", "[settings]") {
  for (const std::string& section : setting_sections()) {
    std::vector<std::string> names;
    for (const Setting& setting : settings())
      if (setting.section == section) names.emplace_back(setting.name);
    CHECK(config_error(fmt::format("{}[{}]\nnonsense = 1\n", minimal, section)) ==
          fmt::format("test.toml:{}: {}.nonsense: unknown key (expected one of: {})", setting_line,
                      section, fmt::join(names, ", ")));
  }
  CHECK_THAT(config_error(minimal + "[measure]\nwarmup_ms = 1\n"),
             Catch::Contains("measure.warmup_ms: unknown key (expected one of: warmup, "));
}

TEST_CASE("a setting's value lands in its field and in plan's settings block", "[settings]") {
  std::vector<std::string> overrides;
  std::vector<std::string> given;
  for (const Setting& setting : settings()) {
    given.push_back(other_allowed_value(setting));
    overrides.push_back(fmt::format("{}={}", dotted_name(setting), given.back()));
  }
  const SweepConfig config = parse_config(minimal, "test.toml", overrides);
  const nlohmann::ordered_json block = settings_json(config);
  REQUIRE(block.size() == settings().size());
  for (std::size_t i = 0; i < settings().size(); ++i) {
    const Setting& setting = settings()[i];
    INFO(dotted_name(setting) << " = " << given[i]);
    const nlohmann::ordered_json& entry = block.at(dotted_name(setting));
    CHECK(toml_text(entry.at("value")) == given[i]);
    CHECK(entry.at("value") != entry.at("default"));
    CHECK(entry.at("default") == default_value(setting));
    CHECK(entry.at("type") == type_name(setting));
    CHECK(entry.at("allowed") == allowed_values(setting));
  }
  // The fields themselves, for a few: the table's pointers reach the structs the runner reads.
  CHECK(config.timing.warmup_runs == 2);
  CHECK(config.timing.repetitions == 4);
  CHECK(config.measure.seed == 43);
  CHECK(config.oracle.sample_rows == 33);
  CHECK(config.timing.cold);
  CHECK(config.measure.distribution == "dominant_key");
}

TEST_CASE("the described axes are the parser's, and their defaults mean leaving them out",
          "[settings]") {
  const std::vector<Case> plain = expand_cases(parse_config(minimal, "test.toml"), {"naive"});
  for (const ConfigKey& key : config_keys()) {
    if (std::string(key.section) != "axes") continue;
    INFO("axes." << key.name);
    CHECK((key.default_toml == nullptr) != (key.default_note == nullptr));
    // The key alone in [axes], with a value no axis takes: refused for what it is (or for a
    // missing seq_len), never as an unknown key, the check that comes first.
    const std::string alone =
        fmt::format("name = \"t\"\nvariants = [\"naive\"]\n[axes]\n{} = \"?\"\n", key.name);
    CHECK_THAT(config_error(alone), !Catch::Contains("unknown key") && Catch::Contains("axes"));
    if (key.default_toml == nullptr) continue;
    const SweepConfig given =
        parse_config(minimal + fmt::format("{} = {}\n", key.name, key.default_toml), "test.toml");
    const std::vector<Case> cases = expand_cases(given, {"naive"});
    REQUIRE(cases.size() == plain.size());
    for (std::size_t i = 0; i < cases.size(); ++i) CHECK(cases[i].id == plain[i].id);
  }
  CHECK_THAT(config_error("colour = 1\n" + minimal),
             Catch::Contains("colour: unknown key (expected one of: name, variants, axes, "
                             "measure, oracle)"));
}

}  // namespace
}  // namespace attnbench
