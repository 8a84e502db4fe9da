// The axes table: every axis a sweep config may give, declared once, as one row. Config parsing
// (config.cpp), the sweep's product (sweep.cpp), the configuration reference (config_keys.cpp)
// and attend's flags (command_attend.cpp) all read it; adding an axis is a row here plus where
// the shape uses its value (CONTRIBUTING.md shows one).
#pragma once

#include <string>
#include <vector>

#include "harness/plan/axes.h"
#include "harness/plan/config_keys.h"
#include "harness/plan/config_reader.h"

namespace attnbench {

struct AxisDefinition {
  // Section "axes": the name, type, allowed values, default and meaning, as the reference shows
  // them. The default is TOML read by `read` itself, so it means what writing it would.
  ConfigKey key;
  // The key's TOML value (one value or an array, or a range for an integer axis) as values,
  // each checked; a bad one fails with "file:line: axes.NAME: problem".
  AxisValues (*read)(const ConfigReader& reader, const toml::node& node, const std::string& key);
  // How one value enters a point of the product; nullptr for an axis that only spells another's
  // values (`stored_as`).
  void (*enter)(AxisPoint& point, const AxisValue& value);
  // The axis whose values this key gives (causal gives mask's); nullptr: its own.
  const char* stored_as = nullptr;
  // The `attnbench attend` flag that gives one value of the axis for the call (e.g. "--softcap"),
  // read by `read` as the config reads the key; nullptr where attend takes it from the tensors or
  // a flag of its own.
  const char* attend_flag = nullptr;
  // Why the PyTorch peer (scripts/peers/torch_sdpa.py) times only the axis's default value: a
  // case holding another is left out, with this reason, in `plan --json`'s peer_skip_reason.
  // nullptr: the peer times every value.
  const char* peer_default_only = nullptr;
};

// Every axis, in sweep order: the product's outermost axis first, the passes innermost.
const std::vector<AxisDefinition>& axis_definitions();

// The name an axis's values are held under in AxesConfig.
std::string stored_name(const AxisDefinition& axis);

// An axis's default values (its default_toml, read by its row); empty where it has none.
AxisValues default_values(const AxisDefinition& axis, const ConfigReader& reader);

// Why the PyTorch peer cannot time a case of this shape ("alibi: ..."): the reason of the first
// axis the peer times only at its default whose value here is not the default (entering the
// default would change the shape). Empty when the peer times it.
std::string peer_skip_reason(const Shape& shape);

}  // namespace attnbench
