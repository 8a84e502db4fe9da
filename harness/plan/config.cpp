#include "harness/plan/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "harness/core/checked_math.h"
#include "harness/core/named_values.h"
#include "harness/core/pass.h"
#include "harness/core/shape.h"
#include "harness/plan/axes_table.h"
#include "harness/plan/config_keys.h"
#include "harness/plan/config_reader.h"
#include "harness/plan/settings.h"
#include "harness/plan/toml_depth.h"

namespace attnbench {

namespace {

// A setting's field takes a TOML value when its type matches and the value is allowed.
bool assign(int64_t& field, const toml::node& node, const Setting& setting) {
  // Only an integer node is read as one: toml++ converts a float past int64's range with
  // undefined behaviour.
  if (!node.is_integer()) return false;
  const auto value = node.value<int64_t>();
  if (!value || !setting.bounds.contain(static_cast<double>(*value))) return false;
  field = *value;
  return true;
}

bool assign(double& field, const toml::node& node, const Setting& setting) {
  const auto value = node.value<double>();  // integers convert too
  if (!(node.is_floating_point() || node.is_integer()) || !value || !std::isfinite(*value) ||
      !setting.bounds.contain(*value))
    return false;
  field = *value == 0 ? 0.0 : *value;  // -0.0 is 0
  return true;
}

bool assign(bool& field, const toml::node& node, const Setting&) {
  if (!node.is_boolean()) return false;
  field = *node.value<bool>();
  return true;
}

bool assign(std::string& field, const toml::node& node, const Setting& setting) {
  if (!node.is_string()) return false;
  const std::string value = *node.value<std::string>();
  if (setting.choices != nullptr) {
    const std::vector<std::string> choices = setting.choices();
    if (std::find(choices.begin(), choices.end(), value) == choices.end()) return false;
  }
  field = value;
  return true;
}

// A scalar setting (settings.h) into its field of `config`, or an error saying what it takes.
void read_setting(const ConfigReader& reader, const Setting& setting, const toml::node& node,
                  SweepConfig& config) {
  if (!visit_field(setting, config, [&](auto& field) { return assign(field, node, setting); })) {
    reader.fail(&node, dotted_name(setting),
                fmt::format("must be {}, got {}", expected_values(setting), shown(node)));
  }
}

// --set axes.seq_len=[128,256] puts the TOML value at the dotted path, creating tables.
void apply_override(toml::table& root, const std::string& assignment) {
  const auto equals = assignment.find('=');
  if (equals == std::string::npos || equals == 0) {
    throw ConfigError(fmt::format("--set {}: expected key=value", assignment));
  }
  // Spaces around '=' are allowed, as TOML allows them (`--set 'axes.seq_len = 16'`): the key
  // was otherwise "axes.seq_len " and reported as unknown.
  const auto trimmed = [](std::string text) {
    const auto blank = [](unsigned char c) { return c == ' ' || c == '\t'; };
    while (!text.empty() && blank(text.back())) text.pop_back();
    std::size_t first = 0;
    while (first < text.size() && blank(text[first])) ++first;
    return text.substr(first);
  };
  const std::string path = trimmed(assignment.substr(0, equals));
  const std::string value = trimmed(assignment.substr(equals + 1));
  if (path.empty()) throw ConfigError(fmt::format("--set {}: expected key=value", assignment));
  // A bare word that is not TOML (measure.peaks=skip, measure.distribution=normal) is the string
  // it spells: shells eat the quotes a TOML string needs. true, false, inf and nan stay TOML.
  const bool bare_word =
      !value.empty() && std::isalpha(static_cast<unsigned char>(value[0])) &&
      std::all_of(value.begin(), value.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == ':';
      });
  toml::table parsed;
  refuse_deep_dotted_keys(value, "--set " + path);
  try {
    parsed = toml::parse("value = " + value);
  } catch (const toml::parse_error& error) {
    if (!bare_word) {
      throw ConfigError(fmt::format("--set {}: value is not valid TOML: {}", path,
                                    std::string(error.description())));
    }
    parsed = toml::parse("value = \"" + value + "\"");
  }
  // One value: a line break would smuggle in keys of its own, unread and unchecked.
  if (parsed.size() != 1) {
    throw ConfigError(
        fmt::format("--set {}: the value holds more than one TOML value (a line break?)", path));
  }
  toml::table* table = &root;
  std::string::size_type start = 0;
  for (auto dot = path.find('.'); dot != std::string::npos; dot = path.find('.', start)) {
    const std::string part = path.substr(start, dot - start);
    if (!table->contains(part)) table->insert(part, toml::table{});
    table = (*table)[part].as_table();
    if (table == nullptr) throw ConfigError(fmt::format("--set {}: {} is not a table", path, part));
    start = dot + 1;
  }
  table->insert_or_assign(path.substr(start), *parsed.get("value"));
}

// kv_lens sets batch (their count) and seq_kv (the longest): a batch that disagrees, a seq_kv or
// seq_len, or tokens (which sets batch too) given beside it is a conflict.
void read_ragged_axes(const ConfigReader& reader, const toml::table& table,
                      const AxesConfig& axes) {
  const toml::node* kv_lens = table.get("kv_lens");
  for (const char* key : {"seq_kv", "seq_len", "tokens"}) {
    if (table.get(key) != nullptr) {
      reader.fail(
          kv_lens, "axes.kv_lens",
          fmt::format("sets batch and seq_kv (the longest length): do not also give {}", key));
    }
  }
  if (table.get("batch") == nullptr) return;
  for (const auto& lengths : axes.values_of<std::vector<int64_t>>("kv_lens"))
    for (int64_t batch : axes.values_of<int64_t>("batch")) {
      if (batch != static_cast<int64_t>(lengths.size())) {
        reader.fail(table.get("batch"), "axes.batch",
                    fmt::format("{} conflicts with kv_lens '{}', which holds {} sequences", batch,
                                kv_lens_text(lengths), lengths.size()));
      }
    }
}

// Each axis of the table the config gives, read and range-checked on its own, and each it leaves
// out that has a default. A key that spells another axis (causal for mask) sets that axis's
// values; the two are refused together (check_axes_together).
void read_each_axis(const ConfigReader& reader, const toml::table& table, AxesConfig& axes) {
  for (const AxisDefinition& axis : axis_definitions()) {
    if (const toml::node* node = table.get(axis.key.name)) {
      axes.set(stored_name(axis), axis.read(reader, *node, std::string("axes.") + axis.key.name));
    } else if (axis.key.default_toml != nullptr && !axes.has(stored_name(axis))) {
      axes.set(stored_name(axis), default_values(axis, reader));
    }
  }
}

// The axes that constrain each other: the sequence lengths, and the lockstep constraints
// (tokens sets batch, model_dim sets heads).
void check_axes_together(const ConfigReader& reader, const toml::table& table,
                         const AxesConfig& axes) {
  const toml::node* axes_node = &table;
  if (table.get("causal") != nullptr && table.get("mask") != nullptr)
    reader.fail(table.get("causal"), "axes.causal", "give either causal or mask, not both");
  const bool seq_len = axes.has("seq_len"), seq_q = axes.has("seq_q"), seq_kv = axes.has("seq_kv");
  if (seq_len && (seq_q || seq_kv)) {
    reader.fail(table.get("seq_len"), "axes.seq_len",
                "give either seq_len or seq_q/seq_kv, not both");
  }
  const bool ragged = axes.has("kv_lens");
  if (ragged) read_ragged_axes(reader, table, axes);
  if (!seq_len && !(seq_q && (seq_kv || ragged))) {
    reader.fail(axes_node, "axes",
                "needs seq_len, or both seq_q and seq_kv (or seq_q and kv_lens)");
  }
  if (axes.has("tokens") && table.get("batch")) {
    reader.fail(table.get("tokens"), "axes.tokens",
                "sets batch = tokens / seq_q: do not also give batch");
  }
  // tokens crosses every seq_q (or seq_len): a pair that does not divide is refused here, where
  // the key's line is known, rather than when the sweep reaches its case.
  if (axes.has("tokens") && (seq_q || seq_len)) {
    for (const int64_t tokens : axes.values_of<int64_t>("tokens")) {
      for (const int64_t rows : axes.values_of<int64_t>(seq_q ? "seq_q" : "seq_len")) {
        if (tokens % rows != 0) {
          reader.fail(table.get("tokens"), "axes.tokens",
                      fmt::format("{} is not a multiple of {} {} (batch = tokens / seq_q)", tokens,
                                  seq_q ? "seq_q" : "seq_len", rows));
        }
      }
    }
  }
  if (axes.has("model_dim") && table.get("heads")) {
    reader.fail(table.get("model_dim"), "axes.model_dim",
                "sets heads = model_dim / d_k: do not also give heads");
  }
}

void read_axes(const ConfigReader& reader, const toml::table& table, AxesConfig& axes) {
  reader.reject_unknown_keys(table, "axes.", config_key_names("axes"));
  read_each_axis(reader, table, axes);
  check_axes_together(reader, table, axes);
}

// The [measure] and [oracle] tables, each key read through the settings table.
void read_settings(const ConfigReader& reader, const toml::table& root, SweepConfig& config) {
  for (const std::string& section : setting_sections()) {
    const toml::node* node = root.get(section);
    if (node == nullptr) continue;
    const toml::table* table = node->as_table();
    if (table == nullptr) reader.fail(node, section, "expected a table");
    std::vector<std::string> known;
    for (const Setting& setting : settings())
      if (setting.section == section) known.emplace_back(setting.name);
    reader.reject_unknown_keys(*table, section + ".", known);
    for (const Setting& setting : settings()) {
      if (setting.section != section) continue;
      if (const toml::node* value = table->get(setting.name))
        read_setting(reader, setting, *value, config);
    }
  }
}

}  // namespace

SweepConfig parse_config(const std::string& text, const std::string& source_name,
                         const std::vector<std::string>& overrides) {
  refuse_deep_dotted_keys(text, source_name);
  toml::table root;
  try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& error) {
    throw ConfigError(fmt::format("{}:{}:{}: TOML syntax error: {}", source_name,
                                  error.source().begin.line, error.source().begin.column,
                                  std::string(error.description())));
  }
  for (const std::string& assignment : overrides) apply_override(root, assignment);

  const ConfigReader reader(source_name);
  SweepConfig config;
  config.source_text = text;
  config.overrides = overrides;
  std::vector<std::string> top_level = config_key_names("");
  top_level.emplace_back("axes");
  for (const std::string& section : setting_sections()) top_level.push_back(section);
  reader.reject_unknown_keys(root, "", top_level);

  const toml::node* name = root.get("name");
  if (name == nullptr) reader.fail(&root, "name", "missing (every run is named after its config)");
  config.name = reader.string(*name, "name");
  // The name becomes a folder name: no separators, no control characters (a NUL would cut
  // the path short), and not "." or "..".
  const bool has_control = std::any_of(config.name.begin(), config.name.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  if (config.name.empty() || config.name.find_first_of("/\\ ") != std::string::npos ||
      has_control || config.name == "." || config.name == "..") {
    reader.fail(name, "name", "must be non-empty with no spaces, slashes or control characters");
  }
  // results/<name>-<UTC time> must be one folder name (255 bytes): a 300-character name passed
  // `plan` and failed at `run` ("File name too long").
  constexpr std::size_t longest_name = 200;
  if (config.name.size() > longest_name) {
    reader.fail(name, "name",
                fmt::format("is {} bytes long; at most {} (it names the run's folder)",
                            config.name.size(), longest_name));
  }

  const toml::node* variants = root.get("variants");
  if (variants == nullptr)
    reader.fail(&root, "variants", "missing (a list of names, or \"cpu\", \"cuda\", \"all\")");
  if (variants->is_string()) {
    config.variants.push_back(reader.string(*variants, "variants"));
  } else if (const toml::array* list = variants->as_array()) {
    if (list->empty()) reader.fail(variants, "variants", "is empty");
    for (const toml::node& element : *list)
      config.variants.push_back(reader.string(element, "variants"));
  } else {
    reader.fail(variants, "variants", "expected a string or an array of strings");
  }

  const toml::table* axes = root["axes"].as_table();
  if (axes == nullptr) reader.fail(root.get("axes"), "axes", "missing [axes] table");
  read_axes(reader, *axes, config.axes);

  read_settings(reader, root, config);
  config.as_json = toml_to_json(root);
  return config;
}

SweepConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
  // Only a regular file of sane size: a directory would read as empty, a FIFO or /dev/zero
  // would block or never end.
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0)
    throw ConfigError(fmt::format("{}: cannot open config file: {}", path, std::strerror(errno)));
  if (S_ISDIR(status.st_mode))
    throw ConfigError(fmt::format("{}: is a directory, not a config file", path));
  if (!S_ISREG(status.st_mode))
    throw ConfigError(fmt::format("{}: not a regular file, so not read as a config", path));
  if (status.st_size > max_config_bytes) {
    throw ConfigError(fmt::format("{}: {} bytes is too large for a config file (at most {})", path,
                                  status.st_size, max_config_bytes));
  }
  std::ifstream file(path);
  if (!file) throw ConfigError(fmt::format("{}: cannot open config file", path));
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) throw ConfigError(fmt::format("{}: cannot read config file", path));
  return parse_config(text.str(), path, overrides);
}

}  // namespace attnbench
