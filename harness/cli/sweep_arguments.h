// The arguments run, check and plan share: a config, --variants, --set and --shard, and the one
// function that turns them into the list of cases, failing on bad input before anything is done.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "harness/plan/config.h"
#include "harness/plan/sweep.h"

namespace attnbench {

struct SweepArguments {
  std::string config_path;
  std::vector<std::string> variants;  // --variants a,b overrides the config's list
  std::vector<std::string> overrides;
  std::string out;
  std::string shard;
  std::vector<int64_t> cases;  // --cases: the plan indices this session runs (all when empty)
  bool resume = false;
  bool retry_failed = false;  // with resume: run the cases that failed before again
};

// --variants a,b (repeatable) into `variants`, name by name; an empty name ("a,,b", "a,") is
// refused, not dropped as CLI11's delimiter drops it.
CLI::Option* add_variants_option(CLI::App* command, std::vector<std::string>& variants);

// The config argument, --variants and --set.
void add_sweep_options(CLI::App* command, SweepArguments& args);

// Loads the config and lists its cases (of the --shard, when given); `sweep_cases`, when given,
// receives the size of the whole, unsharded sweep.
std::vector<Case> plan_cases(const SweepArguments& args, SweepConfig& config,
                             int64_t* sweep_cases = nullptr);

}  // namespace attnbench
