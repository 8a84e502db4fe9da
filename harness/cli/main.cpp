// attnbench: run, check and list attention variants; see `attnbench --help`.
#include <fmt/format.h>

#include <exception>

#include "harness/cli/commands.h"

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
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  } catch (const std::exception& error) {
    fmt::print(stderr, "attnbench: error: {}\n", error.what());
    return 2;
  }
  return exit_code;
}
