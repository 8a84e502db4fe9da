// attnbench merge DIR... --out DIR: join the folders of a sharded run into one.
#include <fmt/format.h>

#include <memory>

#include "harness/cli/commands.h"
#include "harness/results/run_folder.h"

namespace attnbench {

void add_merge_command(CLI::App& app, int& exit_code) {
  auto shards = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  CLI::App* merge =
      app.add_subcommand("merge", "Join the results folders of a sharded run into one");
  merge->add_option("shards", *shards, "Shard results folders")
      ->required()
      ->check(CLI::ExistingDirectory);
  merge->add_option("--out", *out, "The merged results folder (must not exist)")->required();
  merge->callback([shards, out, &exit_code] {
    merge_runs(*shards, *out);
    fmt::print("merged {} folders -> {}\n", shards->size(), *out);
    exit_code = 0;
  });
}

}  // namespace attnbench
