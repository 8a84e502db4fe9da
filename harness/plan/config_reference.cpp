#include "harness/plan/config_reference.h"

#include <fmt/format.h>

#include "harness/plan/axes_table.h"
#include "harness/plan/config_keys.h"
#include "harness/plan/settings.h"

namespace attnbench {

namespace {

// A table cell: a '|' would end it early.
std::string cell(const std::string& text) {
  std::string escaped;
  for (char c : text) {
    if (c == '|') escaped += '\\';
    escaped += c;
  }
  return escaped;
}

std::string row(const std::string& key, const std::string& type, const std::string& allowed,
                const std::string& default_value, const std::string& meaning) {
  return fmt::format("| `{}` | {} | {} | {} | {} |\n", key, cell(type), cell(allowed),
                     cell(default_value), cell(meaning));
}

// A default as it would be written in the config: 0.1, 10, "normal", false.
std::string as_toml(const nlohmann::ordered_json& value) {
  if (value.is_number_float()) return fmt::to_string(value.get<double>());
  return value.dump();
}

// "; `attend --softcap` takes one value" for an axis attend takes as a flag.
std::string attend_flag_note(const char* key_name) {
  for (const AxisDefinition& axis : axis_definitions()) {
    if (std::string(axis.key.name) == key_name && axis.attend_flag != nullptr)
      return fmt::format("; `attend {}` takes one value", axis.attend_flag);
  }
  return {};
}

}  // namespace

std::string config_reference_markdown() {
  std::string text =
      "Every key a config file may hold; `--set section.key=value` sets any of them from the "
      "command line, after the file. An integer axis takes one integer, an array of them, or a "
      "range: `{ from, to, mul }` (geometric) or `{ from, to, step }` (arithmetic); the other "
      "axes take one value or an array of them, and each value of an axis may appear once. The "
      "axes are listed in sweep order: a run's cases walk their product with the first axis "
      "slowest and the passes fastest. A "
      "key not listed here, or a value outside what it allows, is an error naming the key and "
      "line.\n\n";
  text += "| key | type | allowed | default | meaning |\n";
  text += "| --- | --- | --- | --- | --- |\n";
  for (const ConfigKey& key : config_keys()) {
    const std::string name =
        *key.section == '\0' ? key.name : fmt::format("{}.{}", key.section, key.name);
    const std::string default_text =
        key.default_toml != nullptr ? fmt::format("`{}`", key.default_toml) : key.default_note;
    text +=
        row(name, key.type, key.allowed, default_text, key.meaning + attend_flag_note(key.name));
  }
  for (const Setting& setting : settings()) {
    text += row(dotted_name(setting), type_name(setting), allowed_values(setting),
                fmt::format("`{}`", as_toml(default_value(setting))), setting.meaning);
  }
  return text;
}

}  // namespace attnbench
