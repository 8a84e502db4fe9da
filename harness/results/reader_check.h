// What `attnbench export` requires of a folder beyond what attnbench itself reads back: the
// fields every reader shows (plots, tables, reports, the Python package) present in the manifest
// and in each record. attnbench has written them since its first release; a folder without them
// was edited or damaged, and is refused in one line rather than shown with holes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace attnbench {

// Empty when the manifest holds what readers show of a run (its name, machine, build, peaks, GPU,
// commit, date, config); otherwise the first problem, e.g. "missing 'machine'".
std::string manifest_reader_problem(const nlohmann::ordered_json& manifest);

// Empty when an upgraded record holds every field a reader shows (the shape, the status, the
// times and rate, the workspace, the oracle's errors); otherwise the first problem, e.g.
// "missing 'd_k'".
std::string record_reader_problem(const nlohmann::ordered_json& upgraded);

}  // namespace attnbench
