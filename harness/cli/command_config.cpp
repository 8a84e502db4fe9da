// attnbench config reference: every key of a config file, its type, the values it allows, its
// default and meaning, as the markdown table docs/configuration.md holds.
#include <fmt/format.h>

#include "harness/cli/commands.h"
#include "harness/plan/config_reference.h"

namespace attnbench {

void add_config_command(CLI::App& app, int& exit_code) {
  CLI::App* config = app.add_subcommand("config", "Describe the config file's keys");
  config->require_subcommand(1);
  CLI::App* reference = config->add_subcommand(
      "reference", "Print every config key: type, allowed values, default, meaning (markdown)");
  reference->callback([&exit_code] {
    fmt::print("{}", config_reference_markdown());
    exit_code = 0;
  });
}

}  // namespace attnbench
