// The axes `attnbench attend` takes as flags: each axis row with an attend_flag (axes_table.h).
// A flag's value is read as the config reads the key, one value, checked the same, and enters
// the shape the same way, so a new axis with a flag needs no code in the command.
#pragma once

#include <map>
#include <string>

#include "harness/core/shape.h"
#include "harness/plan/axes_table.h"

namespace attnbench {

// `shape` with the value of each axis flag given (keyed by flag, e.g. {"--softcap", "30"}; "true"
// for a switch such as --alibi) entered into it, in table order. A bad value throws ConfigError
// "--flag: problem" (a number's message names the value: "--softcap 1e+300: must be ...").
Shape with_axis_flags(Shape shape, const std::map<std::string, std::string>& given);

// Whether the axis's flag is a switch (a boolean axis: given means true).
bool is_switch(const AxisDefinition& axis);

}  // namespace attnbench
