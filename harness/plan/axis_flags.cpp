#include "harness/plan/axis_flags.h"

#include <fmt/format.h>

#include <cstring>

#include "harness/plan/config_reader.h"
#include "harness/plan/toml_depth.h"

namespace attnbench {

namespace {

bool type_starts(const AxisDefinition& axis, const char* kind) {
  return std::strncmp(axis.key.type, kind, std::strlen(kind)) == 0;
}

// The flag's text as the TOML value a config would hold: a string axis takes it as written, a
// switch is true, and a number is read as TOML reads one.
toml::table flag_value(const AxisDefinition& axis, const std::string& text) {
  toml::table holder;
  if (type_starts(axis, "string")) {
    holder.insert("value", text);
  } else if (is_switch(axis)) {
    holder.insert("value", text == "true");
  } else {
    refuse_deep_dotted_keys(text, axis.attend_flag);
    try {
      holder = toml::parse("value = " + text);
    } catch (const toml::parse_error&) {
      throw ConfigError(fmt::format("{} {}: expected a number", axis.attend_flag, text));
    }
  }
  return holder;
}

}  // namespace

bool is_switch(const AxisDefinition& axis) { return type_starts(axis, "boolean"); }

Shape with_axis_flags(Shape shape, const std::map<std::string, std::string>& given) {
  const ConfigReader reader("");
  AxisPoint point;
  point.shape = std::move(shape);
  for (const AxisDefinition& axis : axis_definitions()) {
    if (axis.attend_flag == nullptr || axis.enter == nullptr) continue;
    const auto found = given.find(axis.attend_flag);
    if (found == given.end()) continue;
    const toml::table holder = flag_value(axis, found->second);
    const toml::node& node = *holder.get("value");
    // A number's message names the value as given, as a config's names the line.
    const std::string key = type_starts(axis, "string") || is_switch(axis)
                                ? axis.attend_flag
                                : fmt::format("{} {}", axis.attend_flag, shown(node));
    const AxisValues values = axis.read(reader, node, key);
    if (values.size() != 1) reader.fail(&node, key, "takes one value");
    axis.enter(point, values.front());
  }
  return point.shape;
}

}  // namespace attnbench
