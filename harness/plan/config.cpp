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
#include "harness/plan/config_keys.h"
#include "harness/plan/settings.h"

namespace attnbench {

namespace {

nlohmann::ordered_json to_json(const toml::node& node) {
  if (const toml::table* table = node.as_table()) {
    nlohmann::ordered_json object = nlohmann::ordered_json::object();
    for (const auto& [key, value] : *table) object[std::string(key.str())] = to_json(value);
    return object;
  }
  if (const toml::array* array = node.as_array()) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const toml::node& value : *array) list.push_back(to_json(value));
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
  const auto number = node.value<double>();
  if (node.is_floating_point() && number && !std::isfinite(*number)) return fmt::to_string(*number);
  std::string text = to_json(node).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  constexpr std::size_t longest = 40;
  if (text.size() > longest) text = text.substr(0, longest) + "...";
  return text;
}

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

// Error messages read "file:line: key: problem".
class ConfigReader {
 public:
  explicit ConfigReader(std::string source_name) : source_name_(std::move(source_name)) {}

  [[noreturn]] void fail(const toml::node* node, const std::string& key,
                         const std::string& message) const {
    std::string where = source_name_;
    if (node != nullptr && node->source().begin.line > 0) {
      where += fmt::format(":{}", node->source().begin.line);
    } else if (node != nullptr) {
      where += " (--set)";
    }
    throw ConfigError(fmt::format("{}: {}: {}", where, key, message));
  }

  void reject_unknown_keys(const toml::table& table, const std::string& prefix,
                           const std::vector<std::string>& known) const {
    for (const auto& [key, node] : table) {
      if (std::find(known.begin(), known.end(), key.str()) == known.end()) {
        fail(&node, prefix + std::string(key.str()),
             fmt::format("unknown key (expected one of: {})", fmt::join(known, ", ")));
      }
    }
  }

  // A scalar setting (settings.h) into its field of `config`, or an error saying what it takes.
  void setting(const Setting& setting, const toml::node& node, SweepConfig& config) const {
    if (!visit_field(setting, config, [&](auto& field) { return assign(field, node, setting); })) {
      fail(&node, dotted_name(setting),
           fmt::format("must be {}, got {}", expected_values(setting), shown(node)));
    }
  }

  int64_t positive_integer(const toml::node& node, const std::string& key) const {
    // Checked before the read: toml++ converts a float past int64's range with undefined
    // behaviour (2e48 as a range's `to`).
    if (!node.is_integer()) fail(&node, key, "expected an integer");
    const auto value = node.value<int64_t>();
    if (!value) fail(&node, key, "expected an integer");
    if (*value <= 0) fail(&node, key, fmt::format("must be positive, got {}", *value));
    return *value;
  }

  // Refuses a value an axis already holds: the two would be the same cases, sharing their ids, so
  // one record would replace the other and shards could not be merged. `text` is the value as
  // parsed, so spellings of one value (64 and 64.0, "window:04" and "window:4") are one value.
  void reject_repeat(std::set<std::string>& seen, const std::string& text,
                     const toml::node& element, const std::string& key) const {
    if (!seen.insert(text).second) {
      fail(&element, key,
           fmt::format("{} is given twice (each value of an axis may appear once)", text));
    }
  }

  // An axis is an integer, a non-empty array of integers, or a range table
  // { from, to, mul } (geometric) / { from, to, step } (arithmetic).
  Axis axis(const toml::node& node, const std::string& key) const {
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
      fail(&node, key,
           "expected an integer, an array of integers, or a range {from, to, mul|step}");
    }
    return values;
  }

  std::vector<bool> bool_axis(const toml::node& node, const std::string& key) const {
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
  std::vector<MaskSpec> mask_axis(const toml::node& node, const std::string& key) const {
    std::vector<MaskSpec> values;
    std::set<std::string> seen;
    for_each_value(node, key, [&](const toml::node& element) {
      if (!element.is_string())
        fail(&element, key, "expected a mask: none, causal, window:L, prefix:P or documents:K");
      std::string error;
      const auto mask = parse_mask(*element.value<std::string>(), &error);
      if (!mask) fail(&element, key, error);
      values.push_back(*mask);
      reject_repeat(seen, fmt::format("'{}'", to_string(*mask)), element, key);
    });
    return values;
  }

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
  std::vector<double> softcap_axis(const toml::node& node, const std::string& key) const {
    std::vector<double> values;
    std::set<std::string> seen;
    for_each_value(node, key, [&](const toml::node& element) {
      const double cap = positive_number(element, key, true);
      if (const std::string problem = softcap_problem(cap); !problem.empty())
        fail(&element, key, problem);
      values.push_back(cap == 0 ? 0.0 : cap);  // -0.0 is 0: off
      reject_repeat(seen, fmt::to_string(values.back()), element, key);
    });
    return values;
  }

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
                         bool allow_zero = false) const {
    const auto value = node.value<double>();  // integers convert too
    if (!value || !(node.is_floating_point() || node.is_integer()))
      fail(&node, key, "expected a number");
    if (*value < 0 || (*value == 0 && !allow_zero) || !std::isfinite(*value)) {
      fail(&node, key,
           fmt::format("must be {}, got {}", allow_zero ? "zero or more" : "positive", *value));
    }
    return *value;
  }

  std::string string(const toml::node& node, const std::string& key) const {
    if (!node.is_string()) fail(&node, key, "expected a string");
    return *node.value<std::string>();
  }

 private:
  std::string source_name_;
};

// --set axes.seq_len=[128,256] puts the TOML value at the dotted path, creating tables.
void apply_override(toml::table& root, const std::string& assignment) {
  const auto equals = assignment.find('=');
  if (equals == std::string::npos || equals == 0) {
    throw ConfigError(fmt::format("--set {}: expected key=value", assignment));
  }
  const std::string path = assignment.substr(0, equals);
  const std::string value = assignment.substr(equals + 1);
  // A bare word that is not TOML (measure.peaks=skip, measure.distribution=normal) is the string
  // it spells: shells eat the quotes a TOML string needs. true, false, inf and nan stay TOML.
  const bool bare_word =
      !value.empty() && std::isalpha(static_cast<unsigned char>(value[0])) &&
      std::all_of(value.begin(), value.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == ':';
      });
  toml::table parsed;
  try {
    parsed = toml::parse("value = " + value);
  } catch (const toml::parse_error& error) {
    if (!bare_word) {
      throw ConfigError(fmt::format("--set {}: value is not valid TOML: {}", path,
                                    std::string(error.description())));
    }
    parsed = toml::parse("value = \"" + value + "\"");
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
  for (const std::vector<int64_t>& lengths : axes.kv_lens)
    for (int64_t batch : axes.batch) {
      if (batch != static_cast<int64_t>(lengths.size())) {
        reader.fail(table.get("batch"), "axes.batch",
                    fmt::format("{} conflicts with kv_lens '{}', which holds {} sequences", batch,
                                kv_lens_text(lengths), lengths.size()));
      }
    }
}

// The serving axes: how K and V are stored (kv_cache, kv_dtype) and ragged batches (kv_lens).
void read_serving_axes(const ConfigReader& reader, const toml::table& table, AxesConfig& axes) {
  if (const toml::node* node = table.get("kv_cache")) {
    axes.kv_cache = reader.spec_axis(
        *node, "axes.kv_cache",
        [](const std::string& text, std::string* error) { return parse_kv_cache(text, error); },
        [](const KvCacheSpec& spec) { return to_string(spec); },
        "expected a string: contiguous or paged:P");
  }
  if (const toml::node* node = table.get("kv_dtype")) {
    axes.kv_dtype = reader.name_axis(
        *node, "axes.kv_dtype", [](const std::string& text) { return parse_kv_dtype(text); },
        "dtype (the case's), int8 or fp8_e4m3");
  }
  if (const toml::node* node = table.get("kv_lens")) {
    axes.kv_lens = reader.spec_axis(
        *node, "axes.kv_lens",
        [](const std::string& text, std::string* error) { return parse_kv_lens(text, error); },
        [](const std::vector<int64_t>& lengths) { return kv_lens_text(lengths); },
        "expected a string of cache lengths, e.g. \"1024,4096,65536\"");
  }
}

// Each axis the table gives, read and range-checked on its own.
void read_each_axis(const ConfigReader& reader, const toml::table& table, AxesConfig& axes) {
  auto optional_axis = [&](const char* key, std::optional<Axis>& target) {
    if (const toml::node* node = table.get(key))
      target = reader.axis(*node, std::string("axes.") + key);
  };
  if (const toml::node* node = table.get("batch")) axes.batch = reader.axis(*node, "axes.batch");
  if (const toml::node* node = table.get("heads")) axes.heads = reader.axis(*node, "axes.heads");
  if (const toml::node* node = table.get("d_k")) axes.d_k = reader.axis(*node, "axes.d_k");
  if (const toml::node* node = table.get("mask")) axes.mask = reader.mask_axis(*node, "axes.mask");
  if (const toml::node* node = table.get("causal")) {
    // The causal boolean of configs written before the mask axis: false is none, true causal.
    if (table.get("mask") != nullptr)
      reader.fail(node, "axes.causal", "give either causal or mask, not both");
    axes.mask.clear();
    for (bool causal : reader.bool_axis(*node, "axes.causal"))
      axes.mask.push_back(causal ? MaskSpec::causal() : MaskSpec::none());
  }
  if (const toml::node* node = table.get("alibi"))
    axes.alibi = reader.bool_axis(*node, "axes.alibi");
  if (const toml::node* node = table.get("softcap"))
    axes.softcap = reader.softcap_axis(*node, "axes.softcap");
  if (const toml::node* node = table.get("dtype"))
    axes.dtype = reader.name_axis(*node, "axes.dtype", parse_dtype, names_of(all_dtypes()));
  if (const toml::node* node = table.get("layout"))
    axes.layout = reader.name_axis(*node, "axes.layout", parse_layout, names_of(all_layouts()));
  read_serving_axes(reader, table, axes);
  if (const toml::node* node = table.get("pass"))
    axes.pass = reader.name_axis(*node, "axes.pass", parse_pass, names_of(all_passes()));
  optional_axis("kv_heads", axes.kv_heads);
  optional_axis("seq_len", axes.seq_len);
  optional_axis("seq_q", axes.seq_q);
  optional_axis("seq_kv", axes.seq_kv);
  optional_axis("d_v", axes.d_v);
  optional_axis("tokens", axes.tokens);
  optional_axis("model_dim", axes.model_dim);
}

// The axes that constrain each other: the sequence lengths, and the lockstep constraints
// (tokens sets batch, model_dim sets heads).
void check_axes_together(const ConfigReader& reader, const toml::table& table, AxesConfig& axes) {
  const toml::node* axes_node = &table;
  if (axes.seq_len && (axes.seq_q || axes.seq_kv)) {
    reader.fail(table.get("seq_len"), "axes.seq_len",
                "give either seq_len or seq_q/seq_kv, not both");
  }
  if (!axes.kv_lens.empty()) read_ragged_axes(reader, table, axes);
  if (!axes.seq_len && !(axes.seq_q && (axes.seq_kv || !axes.kv_lens.empty()))) {
    reader.fail(axes_node, "axes",
                "needs seq_len, or both seq_q and seq_kv (or seq_q and kv_lens)");
  }
  if (axes.tokens && table.get("batch")) {
    reader.fail(table.get("tokens"), "axes.tokens",
                "sets batch = tokens / seq_q: do not also give batch");
  }
  // tokens crosses every seq_q (or seq_len): a pair that does not divide is refused here, where
  // the key's line is known, rather than when the sweep reaches its case.
  if (axes.tokens && (axes.seq_q || axes.seq_len)) {
    const bool by_seq_q = axes.seq_q.has_value();
    for (const int64_t tokens : *axes.tokens) {
      for (const int64_t seq_q : by_seq_q ? *axes.seq_q : *axes.seq_len) {
        if (tokens % seq_q != 0) {
          reader.fail(table.get("tokens"), "axes.tokens",
                      fmt::format("{} is not a multiple of {} {} (batch = tokens / seq_q)", tokens,
                                  by_seq_q ? "seq_q" : "seq_len", seq_q));
        }
      }
    }
  }
  if (axes.model_dim && table.get("heads")) {
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
        reader.setting(setting, *value, config);
    }
  }
}

}  // namespace

SweepConfig parse_config(const std::string& text, const std::string& source_name,
                         const std::vector<std::string>& overrides) {
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
  config.as_json = to_json(root);
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
