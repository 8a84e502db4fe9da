// The keys of a config that have parsing of their own: the top level (config.cpp) and [axes] (the
// axes table, axes_table.h), each described once for the configuration reference. The list of
// known keys a config is checked against is read from here; the scalar settings are
// harness/plan/settings.h.
#pragma once

#include <string>
#include <vector>

namespace attnbench {

struct ConfigKey {
  const char* section;  // "" for the top level, "axes"
  const char* name;
  const char* type;     // "integer axis": one integer, an array of them, or a range
  const char* allowed;  // the values each element may take
  // A TOML value that means what leaving the key out means, or nullptr where no value does and
  // `default_note` says what it means instead ("required", "heads").
  const char* default_toml;
  const char* default_note;
  const char* meaning;
};

// Every such key, the top level first, then the axes in sweep order, as the reference lists them.
const std::vector<ConfigKey>& config_keys();

// The names of the keys of one section ("" or "axes"), in order.
std::vector<std::string> config_key_names(const std::string& section);

}  // namespace attnbench
