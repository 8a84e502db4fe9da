#include "harness/plan/config_keys.h"

#include "harness/plan/axes_table.h"

namespace attnbench {

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = [] {
    std::vector<ConfigKey> all = {
        {"", "name", "string", "no spaces, slashes or control characters; not . or ..", nullptr,
         "required", "the run's name: its results folder is named after it"},
        {"", "variants", "string or array of strings",
         "variant names (attnbench list), or the groups cpu, cuda, all", nullptr, "required",
         "the variants to run; a name given twice runs once"},
    };
    // The axes, each declared once in the axes table, in sweep order.
    for (const AxisDefinition& axis : axis_definitions()) all.push_back(axis.key);
    return all;
  }();
  return keys;
}

std::vector<std::string> config_key_names(const std::string& section) {
  std::vector<std::string> names;
  for (const ConfigKey& key : config_keys())
    if (key.section == section) names.emplace_back(key.name);
  return names;
}

}  // namespace attnbench
