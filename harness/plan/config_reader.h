// Reading a config's TOML values: each read checks what the key allows and fails with one line,
// "file:line: key: problem", so a typo never silently changes what gets measured. The axes table
// (axes_table.cpp) and the config parser (config.cpp) read through it.
#pragma once

#include <fmt/format.h>
#include <toml++/toml.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "harness/core/mask.h"
#include "harness/plan/config.h"

namespace attnbench {

// A TOML value as JSON (the manifest keeps the effective config so).
nlohmann::ordered_json toml_to_json(const toml::node& node);

// A value as an error message quotes it: as written in JSON, ASCII only, cut short when long.
std::string shown(const toml::node& node);

class ConfigReader {
 public:
  // `source_name` starts each message (the file, or "t" in tests); empty for a flag's value,
  // whose messages then start with the key (the flag).
  explicit ConfigReader(std::string source_name) : source_name_(std::move(source_name)) {}

  [[noreturn]] void fail(const toml::node* node, const std::string& key,
                         const std::string& message) const;

  void reject_unknown_keys(const toml::table& table, const std::string& prefix,
                           const std::vector<std::string>& known) const;

  int64_t positive_integer(const toml::node& node, const std::string& key) const;

  // Refuses a value an axis already holds: the two would be the same cases, sharing their ids, so
  // one record would replace the other and shards could not be merged. `text` is the value as
  // parsed, so spellings of one value (64 and 64.0, "window:04" and "window:4") are one value.
  void reject_repeat(std::set<std::string>& seen, const std::string& text,
                     const toml::node& element, const std::string& key) const;

  // An axis is an integer, a non-empty array of integers, or a range table
  // { from, to, mul } (geometric) / { from, to, step } (arithmetic).
  Axis axis(const toml::node& node, const std::string& key) const;

  std::vector<bool> bool_axis(const toml::node& node, const std::string& key) const;

  // A string or an array of strings, each one of the names `parse` accepts.
  template <class Parse>
  auto name_axis(const toml::node& node, const std::string& key, Parse parse,
                 const std::string& expected) const {
    std::vector<typename decltype(parse(std::string()))::value_type> values;
    std::set<std::string> seen;
    for_each_value(node, key, [&](const toml::node& element) {
      if (!element.is_string()) fail(&element, key, fmt::format("expected {}", expected));
      const auto value = parse(*element.value<std::string>());
      if (!value) {
        fail(&element, key,
             fmt::format("unknown value '{}' (expected {})", *element.value<std::string>(),
                         expected));
      }
      values.push_back(*value);
      reject_repeat(seen, to_string(*value), element, key);
    });
    return values;
  }

  // A mask spec or an array of them, each as parse_mask() reads it.
  std::vector<MaskSpec> mask_axis(const toml::node& node, const std::string& key) const;

  // Strings read by `parse` (parse_kv_cache, parse_kv_lens: a value and a one-line reason), a
  // string or an array of them, no value twice: values are compared as `spell` writes the parsed
  // value, so two spellings of one ("paged:4" and "paged:04", "8,32" and "08,32") are one.
  template <class Parse, class Spell>
  auto spec_axis(const toml::node& node, const std::string& key, Parse parse, Spell spell,
                 const char* expected) const {
    std::vector<typename decltype(parse(std::string(), nullptr))::value_type> values;
    std::set<std::string> seen;
    for_each_value(node, key, [&](const toml::node& element) {
      if (!element.is_string()) fail(&element, key, expected);
      std::string error;
      const auto value = parse(*element.value<std::string>(), &error);
      if (!value) fail(&element, key, error);
      values.push_back(*value);
      reject_repeat(seen, fmt::format("'{}'", spell(*value)), element, key);
    });
    return values;
  }

  // Soft-caps: a number or an array of numbers, each 0 (off) or a cap float32 holds as a normal
  // value (shape.h), as `attend --softcap` takes them.
  std::vector<double> softcap_axis(const toml::node& node, const std::string& key) const;

  // An axis given as one value or a non-empty array of them: `read` is called on each value.
  template <class Read>
  void for_each_value(const toml::node& node, const std::string& key, Read read) const {
    if (const toml::array* array = node.as_array()) {
      if (array->empty()) fail(&node, key, "axis is empty");
      for (const toml::node& element : *array) read(element);
    } else {
      read(node);
    }
  }

  double positive_number(const toml::node& node, const std::string& key,
                         bool allow_zero = false) const;

  std::string string(const toml::node& node, const std::string& key) const;

 private:
  std::string source_name_;
};

}  // namespace attnbench
