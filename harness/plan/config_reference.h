// The configuration reference: every key of a config file as a markdown table, generated from
// the tables the parser reads (settings.h, config_keys.h), so the two cannot disagree.
// docs/configuration.md holds a copy that a test keeps in step.
#pragma once

#include <string>

namespace attnbench {

std::string config_reference_markdown();

}  // namespace attnbench
