// attnbench: run, check and list attention variants; see `attnbench --help`.
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <string>

#include "harness/cli/commands.h"
#include "harness/simd/cpu_features.h"

int main(int argc, char** argv) {
  CLI::App app{"attnbench: a benchmarking testbed for scaled dot-product attention"};
  app.require_subcommand(1);
  int exit_code = 0;
  attnbench::add_list_command(app, exit_code);
  attnbench::add_run_command(app, exit_code);
  attnbench::add_check_command(app, exit_code);
  attnbench::add_attend_command(app, exit_code);
  attnbench::add_merge_command(app, exit_code);
  attnbench::add_plan_command(app, exit_code);
  attnbench::add_schema_command(app, exit_code);
  attnbench::add_append_command(app, exit_code);
  attnbench::add_slurm_command(app, exit_code);
  try {
    // A bad ATTNBENCH_CPU_FEATURES is refused before any command makes a folder or runs a case.
    static_cast<void>(attnbench::CpuFeatures::of_this_cpu());
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    // --help and --version are "errors" that exit 0; every real parse error is bad input: one
    // line and status 2, like every other bad input (CLI11's own codes are 100 and up).
    if (error.get_exit_code() == 0) return app.exit(error);
    std::string message = error.what();
    std::replace(message.begin(), message.end(), '\n', ' ');
    fmt::print(stderr, "attnbench: error: {} (see attnbench --help)\n", message);
    return 2;
  } catch (const std::exception& error) {
    fmt::print(stderr, "attnbench: error: {}\n", error.what());
    return 2;
  }
  return exit_code;
}
