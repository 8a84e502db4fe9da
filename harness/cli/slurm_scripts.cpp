#include "harness/cli/slurm_scripts.h"

#include <fmt/format.h>

namespace attnbench {

namespace {

// The #SBATCH lines both jobs share: where they may run and for how long.
std::string placement_lines(const SlurmResources& resources) {
  std::string lines;
  if (!resources.partition.empty())
    lines += fmt::format("#SBATCH --partition={}\n", resources.partition);
  if (!resources.time_limit.empty())
    lines += fmt::format("#SBATCH --time={}\n", resources.time_limit);
  for (const std::string& argument : resources.sbatch_arguments)
    lines += fmt::format("#SBATCH {}\n", argument);
  return lines;
}

}  // namespace

std::string shard_folder(const std::string& folder, int64_t index) {
  return fmt::format("{}/shards/{}", folder, index);
}

std::string merged_folder(const std::string& folder) { return folder + "/merged"; }

std::string scripts_folder(const std::string& folder) { return folder + "/slurm"; }

std::string array_spec(const std::vector<int64_t>& shards) {
  std::vector<std::string> ranges;
  for (std::size_t i = 0; i < shards.size();) {
    std::size_t last = i;
    while (last + 1 < shards.size() && shards[last + 1] == shards[last] + 1) ++last;
    ranges.push_back(last == i ? fmt::format("{}", shards[i])
                               : fmt::format("{}-{}", shards[i], shards[last]));
    i = last + 1;
  }
  return fmt::format("{}", fmt::join(ranges, ","));
}

std::string shell_quote(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                              "0123456789_-+=./:,@%") == std::string::npos) {
    return text;
  }
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string shard_array_script(const SlurmSweep& sweep, const SlurmResources& resources,
                               const std::vector<int64_t>& shards) {
  std::string script = "#!/bin/bash\n";
  script += fmt::format("# attnbench: the {} sweep in {} shards, one per array task.\n", sweep.name,
                        sweep.shard_count);
  script += fmt::format("#SBATCH --job-name=attnbench-{}\n", sweep.name);
  script += fmt::format("#SBATCH --array={}\n", array_spec(shards));
  script += "#SBATCH --nodes=1\n#SBATCH --ntasks=1\n";
  script += fmt::format("#SBATCH --output={}/shard-%a-job-%A.log\n", scripts_folder(sweep.folder));
  if (resources.exclusive) script += "#SBATCH --exclusive\n";
  if (resources.cpus_per_task > 0)
    script += fmt::format("#SBATCH --cpus-per-task={}\n", resources.cpus_per_task);
  if (sweep.needs_gpu && resources.gpus > 0)
    script += fmt::format("#SBATCH --gres=gpu:{}\n", resources.gpus);
  script += placement_lines(resources);

  std::vector<std::string> run = {shell_quote(sweep.binary), "run", shell_quote(sweep.config_path)};
  for (const std::string& option : sweep.run_options) run.push_back(shell_quote(option));
  script += fmt::format(R"script(
shard=${{SLURM_ARRAY_TASK_ID:?submit this script with sbatch}}
out={folder}/shards/$shard
planned=({planned})
echo "attnbench: shard $shard/{count} on $(hostname) -> $out"
# A requeued or resubmitted task finishes what an earlier attempt left instead of starting over.
resume=()
if [ -f "$out/manifest.json" ]; then resume=(--resume); fi
{run} --shard "$shard/{count}" --out "$out" "${{resume[@]}}"
status=$?
# Exit 1 with every case recorded means a case failed the oracle: a result the shard holds, not a
# reason to hold back the merge. An unfinished shard keeps its failure, so the merge waits.
if [ "$status" -eq 1 ] && [ "$(grep -c '' "$out/cases.jsonl")" -ge "${{planned[$shard]}}" ]; then
  status=0
fi
exit "$status"
)script",
                        fmt::arg("folder", shell_quote(sweep.folder)),
                        fmt::arg("planned", fmt::join(sweep.shard_case_counts, " ")),
                        fmt::arg("count", sweep.shard_count), fmt::arg("run", fmt::join(run, " ")));
  return script;
}

std::string merge_script(const SlurmSweep& sweep, const SlurmResources& resources,
                         bool allow_mixed) {
  std::string script = "#!/bin/bash\n";
  script += fmt::format("# attnbench: merge the {} shards of the {} sweep into one run.\n",
                        sweep.shard_count, sweep.name);
  script += fmt::format("#SBATCH --job-name=attnbench-{}-merge\n", sweep.name);
  script += "#SBATCH --nodes=1\n#SBATCH --ntasks=1\n";
  script += fmt::format("#SBATCH --output={}/merge-job-%j.log\n", scripts_folder(sweep.folder));
  script += placement_lines(resources);
  std::vector<std::string> merge = {shell_quote(sweep.binary), "merge"};
  for (int64_t index = 0; index < sweep.shard_count; ++index)
    merge.push_back(shell_quote(shard_folder(sweep.folder, index)));
  merge.push_back("--out");
  merge.push_back(shell_quote(merged_folder(sweep.folder)));
  if (allow_mixed) merge.push_back("--allow-mixed");
  script += fmt::format("\nexec {}\n", fmt::join(merge, " "));
  return script;
}

}  // namespace attnbench
