// The sbatch scripts of a sweep split over a Slurm cluster: an array job with one shard per task,
// and a merge job that runs when every task has succeeded. Plain text from plain data, so the
// scripts are tested (and shown by `attnbench slurm --dry-run`) without a cluster.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnbench {

// One sweep as Slurm jobs. Paths are absolute: a job starts in whatever folder sbatch ran in.
struct SlurmSweep {
  std::string name;                      // the config's name, for job names
  std::string binary;                    // the attnbench that runs every shard
  std::string config_path;               // the copy of the config the jobs read
  std::vector<std::string> run_options;  // passed to every `run`: --variants, --set
  std::string folder;                    // holds shards/, slurm/ and merged/
  int64_t shard_count = 1;
  std::vector<int64_t> shard_case_counts;  // the cases each shard must record
  bool needs_gpu = false;                  // some variant of the sweep runs on CUDA
};

// What every job asks Slurm for; empty or zero means "the cluster's default".
struct SlurmResources {
  std::string partition;
  std::string time_limit;
  int64_t gpus = 1;  // per shard, only when the sweep needs a GPU
  int64_t cpus_per_task = 0;
  bool exclusive = true;  // a benchmark wants a quiet node
  std::vector<std::string> sbatch_arguments;
};

// The layout of a sweep's folder.
std::string shard_folder(const std::string& folder, int64_t index);  // <folder>/shards/<index>
std::string merged_folder(const std::string& folder);                // <folder>/merged
std::string scripts_folder(const std::string& folder);               // <folder>/slurm

// "0-2" for consecutive shards, "1,3,5-7" otherwise.
std::string array_spec(const std::vector<int64_t>& shards);

// Empty when `text` holds no control character (bytes below 0x20, and 0x7f); otherwise the first
// one as a C escape and its position, e.g. "\n at byte 9". A newline in a value written into a
// script would end its line and start a command of the value's choosing: every value the scripts
// carry must have none (the builders below throw std::invalid_argument on one).
std::string control_character(const std::string& text);

// A word bash reads back as exactly `text` (which holds no control character).
std::string shell_quote(const std::string& text);

// A word an `#SBATCH` line gives sbatch as exactly `text` (no control character). sbatch reads
// directives with its own rules, not bash's: an unquoted space ends the word, a backslash does not
// escape one, and an unquoted '#' starts a comment; inside double quotes only '\' and '"' need a
// backslash (checked against sbatch 22.05).
std::string sbatch_quote(const std::string& text);

// Empty when `folder` can name the log files of an `#SBATCH --output` line; otherwise why not:
// sbatch reads a backslash in a log path as "expand no %-pattern", so the logs would be named
// literally (and the backslash dropped).
std::string log_folder_problem(const std::string& folder);

// `path` as an `#SBATCH --output` pattern names it: '%' doubled, so "/x/run%j" stays itself.
std::string escape_log_pattern(const std::string& path);

// The array job: task I runs shard I/N into shard_folder(I), resuming the folder when a previous
// attempt left one.
std::string shard_array_script(const SlurmSweep& sweep, const SlurmResources& resources,
                               const std::vector<int64_t>& shards);

// The merge job: joins every shard into merged_folder(). Submitted with --dependency=afterok.
std::string merge_script(const SlurmSweep& sweep, const SlurmResources& resources,
                         bool allow_mixed);

}  // namespace attnbench
