#include "harness/cli/sweep_arguments.h"

#include "harness/variant/registry.h"

namespace attnbench {

void add_sweep_options(CLI::App* command, SweepArguments& args) {
  command->add_option("config", args.config_path, "Sweep config (TOML), e.g. configs/quick.toml")
      ->required();
  command
      ->add_option("--variants", args.variants,
                   "Variants or groups (cpu, cuda, all) instead of the config's")
      ->delimiter(',');
  command->add_option("--set", args.overrides, "Override a config key: --set measure.repetitions=5")
      ->take_all();
}

std::vector<Case> plan_cases(const SweepArguments& args, SweepConfig& config,
                             int64_t* sweep_cases) {
  config = load_config(args.config_path, args.overrides);
  if (!args.variants.empty()) {
    // Part of the effective config, so a --resume with other variants is refused like one with
    // other --set values: the case indices would not line up.
    config.variants = args.variants;
    config.as_json["variants"] = args.variants;
  }
  std::vector<Case> cases = expand_cases(config, resolve_variants(config.variants));
  if (sweep_cases != nullptr) *sweep_cases = static_cast<int64_t>(cases.size());
  if (!args.shard.empty()) cases = select_shard(cases, parse_shard_option(args.shard));
  return cases;
}

}  // namespace attnbench
