// The CLI's subcommands. Each adds itself to the app and, when chosen, sets the exit code:
// 0 success, 1 a case failed (or the device was lost), 2 bad input (thrown as an exception and
// reported by main as one line).
#pragma once

#include <CLI/CLI.hpp>

namespace attnbench {

void add_list_command(CLI::App& app, int& exit_code);
void add_run_command(CLI::App& app, int& exit_code);
void add_check_command(CLI::App& app, int& exit_code);
void add_attend_command(CLI::App& app, int& exit_code);
void add_merge_command(CLI::App& app, int& exit_code);
void add_plan_command(CLI::App& app, int& exit_code);
void add_schema_command(CLI::App& app, int& exit_code);
void add_append_command(CLI::App& app, int& exit_code);
void add_prepare_command(CLI::App& app, int& exit_code);
void add_slurm_command(CLI::App& app, int& exit_code);
void add_config_command(CLI::App& app, int& exit_code);
void add_export_command(CLI::App& app, int& exit_code);

// Thrown for input the user must fix; main prints the message and exits with 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace attnbench
