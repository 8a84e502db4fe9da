#include "harness/cli/sweep_arguments.h"

#include <fmt/format.h>

#include <string_view>

#include "harness/cli/decimal_argument.h"
#include "harness/variant/registry.h"

namespace attnbench {

CLI::Option* add_variants_option(CLI::App* command, std::vector<std::string>& variants) {
  const CLI::Validator no_empty_name(
      [](std::string& list) -> std::string {
        for (const std::string_view name : comma_separated_items(list))
          if (name.empty()) return fmt::format("an empty variant name in '{}'", list);
        return "";
      },
      "NAME[,NAME...]");
  return command
      ->add_option_function<std::vector<std::string>>(
          "--variants",
          [&variants](const std::vector<std::string>& lists) {
            variants.clear();
            for (const std::string& list : lists)
              for (const std::string_view name : comma_separated_items(list))
                variants.emplace_back(name);
          },
          "Variants or groups (cpu, cuda, all) instead of the config's")
      ->check(no_empty_name);
}

void add_sweep_options(CLI::App* command, SweepArguments& args) {
  command->add_option("config", args.config_path, "Sweep config (TOML), e.g. configs/quick.toml")
      ->required();
  add_variants_option(command, args.variants);
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
