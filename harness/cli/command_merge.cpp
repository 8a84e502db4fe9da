// attnbench merge DIR... --out DIR: join the folders of a sharded run into one, refusing an
// incomplete set of shards and shards from different hardware.
#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "harness/cli/commands.h"
#include "harness/results/sharded_run.h"

namespace attnbench {

namespace {

// merge writes a new folder; it has no --resume, so a folder that holds anything is refused here
// with advice that fits merge. One holding only what merge_may_replace allows (what a run killed
// as it started leaves) can be used again, as for `run`.
void require_new_folder(const std::string& out) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::file_status status = fs::status(out, error);
  if (!fs::exists(status)) return;
  if (!fs::is_directory(status))
    throw UsageError(
        fmt::format("--out {}: exists and is not a folder; choose another --out", out));
  for (const fs::directory_entry& entry : fs::directory_iterator(out, error)) {
    if (merge_may_replace(entry)) continue;
    throw UsageError(fmt::format(
        "--out {}: already exists; merge writes a new folder: choose another --out", out));
  }
}

}  // namespace

void add_merge_command(CLI::App& app, int& exit_code) {
  auto shards = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  auto allow_mixed = std::make_shared<bool>(false);
  CLI::App* merge =
      app.add_subcommand("merge", "Join the results folders of a sharded run into one");
  merge->add_option("shards", *shards, "Shard results folders")
      ->required()
      ->check(CLI::ExistingDirectory);
  merge->add_option("--out", *out, "The merged results folder (must not exist, or be an empty folder)")->required();
  merge->add_flag("--allow-mixed", *allow_mixed,
                  "Merge shards that ran on different CPU or GPU models (each record keeps its "
                  "machine)");
  merge->callback([shards, out, allow_mixed, &exit_code] {
    require_new_folder(*out);
    merge_runs(*shards, *out, *allow_mixed);
    fmt::print("merged {} folders -> {}\n", shards->size(), *out);
    exit_code = 0;
  });
}

}  // namespace attnbench
