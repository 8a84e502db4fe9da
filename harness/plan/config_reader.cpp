#include "harness/plan/config_reader.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "harness/core/checked_math.h"
#include "harness/core/shape.h"

namespace attnbench {

nlohmann::ordered_json toml_to_json(const toml::node& node) {
  if (const toml::table* table = node.as_table()) {
    nlohmann::ordered_json object = nlohmann::ordered_json::object();
    for (const auto& [key, value] : *table) object[std::string(key.str())] = toml_to_json(value);
    return object;
  }
  if (const toml::array* array = node.as_array()) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const toml::node& value : *array) list.push_back(toml_to_json(value));
    return list;
  }
  if (node.is_integer()) return *node.value<int64_t>();
  if (node.is_floating_point()) return *node.value<double>();
  if (node.is_boolean()) return *node.value<bool>();
  if (node.is_string()) return *node.value<std::string>();
  return nullptr;  // dates and times: not used by any config key
}

// A value as an error message quotes it: as written in JSON, ASCII only (so cutting it short
// when long splits no character).
std::string shown(const toml::node& node) {
  // toml_to_json has no JSON for them ("got null" named a value that was not there).
  if (node.is_date()) return "a TOML date";
  if (node.is_time()) return "a TOML time";
  if (node.is_date_time()) return "a TOML date-time";
  const auto number = node.value<double>();
  if (node.is_floating_point() && number && !std::isfinite(*number)) return fmt::to_string(*number);
  std::string text =
      toml_to_json(node).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  constexpr std::size_t longest = 40;
  if (text.size() > longest) text = text.substr(0, longest) + "...";
  return text;
}

void ConfigReader::fail(const toml::node* node, const std::string& key,
                        const std::string& message) const {
  // A value from a flag (attend's axis flags) has no file: the flag names it.
  if (source_name_.empty()) throw ConfigError(fmt::format("{}: {}", key, message));
  std::string where = source_name_;
  if (node != nullptr && node->source().begin.line > 0) {
    where += fmt::format(":{}", node->source().begin.line);
  } else if (node != nullptr) {
    where += " (--set)";
  }
  throw ConfigError(fmt::format("{}: {}: {}", where, key, message));
}

void ConfigReader::reject_unknown_keys(const toml::table& table, const std::string& prefix,
                                       const std::vector<std::string>& known) const {
  for (const auto& [key, node] : table) {
    if (std::find(known.begin(), known.end(), key.str()) == known.end()) {
      fail(&node, prefix + std::string(key.str()),
           fmt::format("unknown key (expected one of: {})", fmt::join(known, ", ")));
    }
  }
}

int64_t ConfigReader::positive_integer(const toml::node& node, const std::string& key) const {
  // Checked before the read: toml++ converts a float past int64's range with undefined
  // behaviour (2e48 as a range's `to`).
  if (!node.is_integer()) fail(&node, key, "expected an integer");
  const auto value = node.value<int64_t>();
  if (!value) fail(&node, key, "expected an integer");
  if (*value <= 0) fail(&node, key, fmt::format("must be positive, got {}", *value));
  return *value;
}

void ConfigReader::reject_repeat(std::set<std::string>& seen, const std::string& text,
                                 const toml::node& element, const std::string& key) const {
  if (!seen.insert(text).second) {
    fail(&element, key,
         fmt::format("{} is given twice (each value of an axis may appear once)", text));
  }
}

Axis ConfigReader::axis(const toml::node& node, const std::string& key) const {
  Axis values;
  if (node.is_integer()) {
    values.push_back(positive_integer(node, key));
  } else if (const toml::array* array = node.as_array()) {
    if (array->empty()) fail(&node, key, "axis is empty");
    std::set<std::string> seen;
    for (const toml::node& element : *array) {
      values.push_back(positive_integer(element, key));
      reject_repeat(seen, fmt::to_string(values.back()), element, key);
    }
  } else if (const toml::table* range = node.as_table()) {
    reject_unknown_keys(*range, key + ".", {"from", "to", "mul", "step"});
    const toml::node* from = range->get("from");
    const toml::node* to = range->get("to");
    if (!from || !to) fail(&node, key, "a range needs 'from' and 'to'");
    const int64_t first = positive_integer(*from, key + ".from");
    const int64_t last = positive_integer(*to, key + ".to");
    if (last < first)
      fail(to, key + ".to", fmt::format("'to' ({}) is below 'from' ({})", last, first));
    const toml::node* mul = range->get("mul");
    const toml::node* step = range->get("step");
    if ((mul != nullptr) == (step != nullptr))
      fail(&node, key, "a range needs exactly one of 'mul' or 'step'");
    // Each next value is computed with checked arithmetic: a value past int64 is past 'to'.
    const bool geometric = mul != nullptr;
    const int64_t factor =
        geometric ? positive_integer(*mul, key + ".mul") : positive_integer(*step, key + ".step");
    if (geometric && factor < 2) fail(mul, key + ".mul", "must be at least 2");
    for (std::optional<int64_t> v = first; v && *v <= last;
         v = geometric ? checked_mul(*v, factor) : checked_add(*v, factor)) {
      if (values.size() == max_axis_length) {
        fail(&node, key,
             fmt::format("the range has more than {} values; use a larger {}", max_axis_length,
                         geometric ? "mul" : "step"));
      }
      values.push_back(*v);
    }
  } else {
    fail(&node, key, "expected an integer, an array of integers, or a range {from, to, mul|step}");
  }
  return values;
}

std::vector<bool> ConfigReader::bool_axis(const toml::node& node, const std::string& key) const {
  std::vector<bool> values;
  if (node.is_boolean()) return {*node.value<bool>()};
  const toml::array* array = node.as_array();
  if (array == nullptr) fail(&node, key, "expected true, false or an array of them");
  if (array->empty()) fail(&node, key, "axis is empty");
  std::set<std::string> seen;
  for (const toml::node& element : *array) {
    if (!element.is_boolean()) fail(&element, key, "expected true or false");
    values.push_back(*element.value<bool>());
    reject_repeat(seen, values.back() ? "true" : "false", element, key);
  }
  return values;
}

std::vector<MaskSpec> ConfigReader::mask_axis(const toml::node& node,
                                              const std::string& key) const {
  return spec_axis(
      node, key,
      [](const std::string& text, std::string* error) { return parse_mask(text, error); },
      [](const MaskSpec& mask) { return to_string(mask); },
      "expected a mask: none, causal, window:L, prefix:P or documents:K");
}

std::vector<double> ConfigReader::softcap_axis(const toml::node& node,
                                               const std::string& key) const {
  std::vector<double> values;
  std::set<std::string> seen;
  for_each_value(node, key, [&](const toml::node& element) {
    const auto cap = element.value<double>();  // integers convert too
    if (!cap || !(element.is_floating_point() || element.is_integer()))
      fail(&element, key, "expected a number");
    if (const std::string problem = softcap_problem(*cap); !problem.empty())
      fail(&element, key, problem);
    values.push_back(*cap == 0 ? 0.0 : *cap);  // -0.0 is 0: off
    reject_repeat(seen, fmt::to_string(values.back()), element, key);
  });
  return values;
}

double ConfigReader::positive_number(const toml::node& node, const std::string& key,
                                     bool allow_zero) const {
  const auto value = node.value<double>();  // integers convert too
  if (!value || !(node.is_floating_point() || node.is_integer()))
    fail(&node, key, "expected a number");
  if (*value < 0 || (*value == 0 && !allow_zero) || !std::isfinite(*value)) {
    fail(&node, key,
         fmt::format("must be {}, got {}", allow_zero ? "zero or more" : "positive", *value));
  }
  return *value;
}

std::string ConfigReader::string(const toml::node& node, const std::string& key) const {
  if (!node.is_string()) fail(&node, key, "expected a string");
  return *node.value<std::string>();
}

}  // namespace attnbench
