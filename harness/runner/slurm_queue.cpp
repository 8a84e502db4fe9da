#include "harness/runner/slurm_queue.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <stdexcept>

#include "harness/runner/slurm_scripts.h"

namespace attnbench {

namespace {

// Output and exit status of a shell command (stderr passes through to the user).
struct CommandResult {
  std::string output;
  int status = -1;
};

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 512> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) result.output += buffer.data();
  const int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace

bool sbatch_on_path() { return run_command("command -v sbatch >/dev/null 2>&1").status == 0; }

// sbatch --parsable prints "jobid" or "jobid;cluster".
std::string submit_job(const std::string& script_path, const std::string& dependency) {
  std::string command = "sbatch --parsable";
  if (!dependency.empty()) command += " --dependency=" + dependency;
  command += " " + shell_quote(script_path);
  const CommandResult result = run_command(command);
  const std::string job_id = result.output.substr(0, result.output.find_first_of(";\n"));
  if (result.status != 0 || job_id.empty()) {
    throw std::runtime_error(
        fmt::format("`{}` failed (exit status {}; its message is above)", command, result.status));
  }
  // The id goes into the next job's --dependency and into squeue and scancel commands: digits
  // only (a job array's id too), never text pasted into a shell command.
  if (!std::all_of(job_id.begin(), job_id.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    throw std::runtime_error(
        fmt::format("`{}` printed '{}' where sbatch --parsable prints a job id", command,
                    job_id.size() <= 40 ? job_id : job_id.substr(0, 37) + "..."));
  }
  return job_id;
}

bool job_still_queued(const std::string& job_id) {
  if (job_id.empty()) return false;
  const CommandResult result =
      run_command(fmt::format("squeue -h -o %i -j {} 2>/dev/null", shell_quote(job_id)));
  return result.status == 0 && result.output.find_first_not_of(" \n") != std::string::npos;
}

void cancel_job(const std::string& job_id) {
  run_command(fmt::format("scancel {}", shell_quote(job_id)));
}

}  // namespace attnbench
