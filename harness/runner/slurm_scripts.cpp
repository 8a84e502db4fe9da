#include "harness/runner/slurm_scripts.h"

#include <fmt/format.h>

#include <stdexcept>

namespace attnbench {

namespace {

// Characters bash and sbatch both read as themselves outside quotes.
constexpr const char* plain_characters =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=./:,@%";

bool is_plain(const std::string& text) {
  return !text.empty() && text.find_first_not_of(plain_characters) == std::string::npos;
}

// The builders' own guard: the command checks every option first and names it; this catches a
// value that reached a script some other way.
void require_no_control_character(const std::string& what, const std::string& text) {
  if (const std::string found = control_character(text); !found.empty()) {
    throw std::invalid_argument(
        fmt::format("{}: holds a control character ({}); it cannot go into a script", what, found));
  }
}

void require_no_control_characters(const SlurmSweep& sweep, const SlurmResources& resources) {
  require_no_control_character("the sweep's name", sweep.name);
  require_no_control_character("the attnbench binary's path", sweep.binary);
  require_no_control_character("the config's path", sweep.config_path);
  require_no_control_character("the sweep folder", sweep.folder);
  for (const std::string& option : sweep.run_options)
    require_no_control_character("a run option", option);
  require_no_control_character("the partition", resources.partition);
  require_no_control_character("the time limit", resources.time_limit);
  for (const std::string& argument : resources.sbatch_arguments)
    require_no_control_character("an sbatch argument", argument);
}

// The #SBATCH lines both jobs share: where they may run and for how long.
std::string placement_lines(const SlurmResources& resources) {
  std::string lines;
  if (!resources.partition.empty())
    lines += fmt::format("#SBATCH --partition={}\n", sbatch_quote(resources.partition));
  if (!resources.time_limit.empty())
    lines += fmt::format("#SBATCH --time={}\n", sbatch_quote(resources.time_limit));
  for (const std::string& argument : resources.sbatch_arguments)
    lines += fmt::format("#SBATCH {}\n", sbatch_quote(argument));
  return lines;
}

// The --output line of a job: its logs go to the scripts folder, `file` names them.
std::string output_line(const SlurmSweep& sweep, const std::string& file) {
  if (const std::string problem = log_folder_problem(sweep.folder); !problem.empty())
    throw std::invalid_argument(fmt::format("{}: {}", sweep.folder, problem));
  return fmt::format("#SBATCH --output={}\n",
                     sbatch_quote(escape_log_pattern(scripts_folder(sweep.folder)) + "/" + file));
}

}  // namespace

std::string control_character(const std::string& text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != 0x7f) continue;
    const char* name = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : nullptr;
    return fmt::format("{} at byte {}", name != nullptr ? name : fmt::format("\\x{:02x}", c), i);
  }
  return {};
}

std::string sbatch_quote(const std::string& text) {
  if (is_plain(text)) return text;
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '\\' || c == '"') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

std::string log_folder_problem(const std::string& folder) {
  if (folder.find('\\') != std::string::npos) {
    return "a backslash in the folder cannot go into an #SBATCH --output log path (sbatch reads "
           "it as \"expand no %-pattern\" and drops it); choose a folder without one";
  }
  return {};
}

std::string escape_log_pattern(const std::string& path) {
  std::string escaped;
  for (const char c : path) {
    if (c == '%') escaped += '%';
    escaped += c;
  }
  return escaped;
}

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
  if (is_plain(text)) return text;
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string shard_array_script(const SlurmSweep& sweep, const SlurmResources& resources,
                               const std::vector<int64_t>& shards) {
  require_no_control_characters(sweep, resources);
  std::string script = "#!/bin/bash\n";
  script += fmt::format("# attnbench: the {} sweep in {} shards, one per array task.\n", sweep.name,
                        sweep.shard_count);
  script += fmt::format("#SBATCH --job-name={}\n", sbatch_quote("attnbench-" + sweep.name));
  script += fmt::format("#SBATCH --array={}\n", array_spec(shards));
  script += "#SBATCH --nodes=1\n#SBATCH --ntasks=1\n";
  script += output_line(sweep, "shard-%a-job-%A.log");
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
  require_no_control_characters(sweep, resources);
  std::string script = "#!/bin/bash\n";
  script += fmt::format("# attnbench: merge the {} shards of the {} sweep into one run.\n",
                        sweep.shard_count, sweep.name);
  script +=
      fmt::format("#SBATCH --job-name={}\n", sbatch_quote("attnbench-" + sweep.name + "-merge"));
  script += "#SBATCH --nodes=1\n#SBATCH --ntasks=1\n";
  script += output_line(sweep, "merge-job-%j.log");
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
