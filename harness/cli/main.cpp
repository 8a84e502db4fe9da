// attnbench: run, check and list attention variants; see `attnbench --help`.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/cli/commands.h"
#include "harness/cli/printable.h"
#include "harness/core/diagnostic.h"
#include "harness/measure/machine.h"
#include "harness/measure/thread_limit.h"
#include "harness/simd/cpu_features.h"
#include "harness/simd/isa.h"

namespace {

// The one place errors are printed: one line, whatever the message carries.
int bad_input(const std::string& message) {
  attnbench::print_diagnostic("attnbench: error: {}\n", attnbench::printable(message));
  return 2;
}

// ATTNBENCH_FLASH_CPU_ISA is read by flash_cpu the first time a case runs; a value no path has,
// or one this CPU cannot run, is refused here instead, before any work, as any bad input is.
void check_isa_override() {
  const char* requested = std::getenv("ATTNBENCH_FLASH_CPU_ISA");
  if (requested == nullptr || *requested == '\0') return;
  // The paths on emulated AVX-512 (and tiles), for tests, run where avx2 does.
  const bool emulated = std::string(requested) == attnbench::kAmxEmulatedName ||
                        std::string(requested) == attnbench::kAvx512Bf16EmulatedName;
  try {
    attnbench::parse_isa(emulated ? "avx2" : requested, attnbench::CpuFeatures::of_this_cpu());
  } catch (const std::invalid_argument& error) {
    std::string message = error.what();
    // parse_isa names the hardware paths, which ATTNBENCH_CPU_FEATURES also takes; this variable
    // takes the emulated ones too.
    if (message.find("is not one of") != std::string::npos)
      message += std::string(", ") + attnbench::kAvx512Bf16EmulatedName + ", " +
                 attnbench::kAmxEmulatedName;
    throw attnbench::UsageError("ATTNBENCH_FLASH_CPU_ISA: " + message);
  }
}

// More OpenMP threads than CPUs are held to the CPUs, saying so (the manifest keeps
// OMP_NUM_THREADS as given beside the threads used); a count past any machine is refused.
void check_thread_count() {
  try {
    const attnbench::ThreadLimit limit = attnbench::limit_threads_to_cpus();
    if (limit.used != limit.requested) {
      attnbench::print_diagnostic(
          "attnbench: warning: OMP_NUM_THREADS asks for {} threads and this process may run "
          "on {} CPU(s): using {}\n",
          limit.requested, limit.used, limit.used);
    }
  } catch (const std::invalid_argument& error) {
    throw attnbench::UsageError(error.what());
  }
}

void check_environment() {
  check_isa_override();
  check_thread_count();
}

// CLI11 takes an empty value (`--scale ''`) as the option's default for a number and as "" for
// text: a value the user gave that the command would not use. Refused by the option's name.
void refuse_empty_values(const CLI::App& command) {
  for (const CLI::Option* option : command.get_options()) {
    if (option->get_type_size_max() == 0) continue;  // a flag: no value to be empty
    const std::vector<std::string>& values = option->results();
    if (std::any_of(values.begin(), values.end(), [](const std::string& v) { return v.empty(); }))
      throw attnbench::UsageError(fmt::format("{}: an empty value", option->get_name()));
  }
}

// Every command and subcommand refuses empty values once its arguments are parsed (so --help still
// works), before its callback does anything; the commands that run, plan, submit or write cases
// or records (all but list and schema, which only describe) also check the environment's overrides
// and thread count.
void check_arguments(CLI::App* command, bool top_level) {
  const std::string& name = command->get_name();
  const bool checks_environment = top_level && name != "list" && name != "schema";
  command->parse_complete_callback([command, checks_environment] {
    refuse_empty_values(*command);
    if (checks_environment) check_environment();
  });
  for (CLI::App* subcommand : command->get_subcommands([](CLI::App*) { return true; }))
    check_arguments(subcommand, false);
}

// The subcommands of `command`, by name.
std::vector<std::string> subcommand_names(CLI::App& command) {
  std::vector<std::string> names;
  for (CLI::App* sub : command.get_subcommands([](CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

// What is wrong with the words that should name the subcommands (the top level's, and the
// subcommands' own where one is required, as config's): one missing, unknown, or an option in its
// place. Empty when they name them, or --help or --version comes first.
std::string unknown_subcommand(CLI::App& app, int argc, char** argv) {
  CLI::App* command = &app;
  std::string path;
  for (int i = 1; i < argc && command->get_require_subcommand_min() > 0; ++i) {
    const std::string word = argv[i];
    const std::vector<std::string> names = subcommand_names(*command);
    const std::string where = path.empty() ? "" : " of " + path;
    if (!word.empty() && word[0] == '-') {
      if (word == "-h" || word == "--help" || word == "--version" || i > 1) return "";
      return fmt::format("{} comes before any subcommand{}; the subcommands: {}", word, where,
                         fmt::join(names, ", "));
    }
    if (std::find(names.begin(), names.end(), word) == names.end())
      return fmt::format("unknown subcommand '{}'{} (the subcommands: {})", word, where,
                         fmt::join(names, ", "));
    command = command->get_subcommand(word);
    path += (path.empty() ? "" : " ") + word;
  }
  if (command->get_require_subcommand_min() == 0) return "";
  return fmt::format("{} needs a subcommand: one of {}", path.empty() ? "attnbench" : path,
                     fmt::join(subcommand_names(*command), ", "));
}

// The command line run: its exit status.
int run_command(int argc, char** argv) {
  CLI::App app{"attnbench: a benchmarking testbed for scaled dot-product attention"};
  app.require_subcommand(1);
  app.set_version_flag("--version", [] { return attnbench::version_line(); });
  int exit_code = 0;
  attnbench::add_list_command(app, exit_code);
  attnbench::add_run_command(app, exit_code);
  attnbench::add_check_command(app, exit_code);
  attnbench::add_attend_command(app, exit_code);
  attnbench::add_merge_command(app, exit_code);
  attnbench::add_plan_command(app, exit_code);
  attnbench::add_schema_command(app, exit_code);
  attnbench::add_append_command(app, exit_code);
  attnbench::add_prepare_command(app, exit_code);
  attnbench::add_slurm_command(app, exit_code);
  attnbench::add_config_command(app, exit_code);
  attnbench::add_export_command(app, exit_code);

  for (CLI::App* command : app.get_subcommands([](CLI::App*) { return true; }))
    check_arguments(command, true);
  // CLI11 says only "A subcommand is required" for a word that names none, at the top level
  // (`attnbench zzz`) and below it (`attnbench config zzz`), and for an option given first.
  if (const std::string problem = unknown_subcommand(app, argc, argv); !problem.empty())
    return bad_input(problem);
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
    return bad_input(message + " (see attnbench --help)");
  } catch (const std::exception& error) {
    return bad_input(error.what());
  }
  // A short output sits in stdout's buffer until here: a write that fails (a full disk) is refused
  // as any failed write is, not left to exit 0.
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int flush_error = errno;
  if (!flushed || std::ferror(stdout)) {
    return bad_input(fmt::format(
        "cannot write to standard output{}",
        flush_error != 0 ? ": " + std::string(std::strerror(flush_error)) : std::string()));
  }
  return exit_code;
}

// Standard input, output and error that were closed (`2>&-`) are opened on /dev/null first: else
// the next file attnbench opens takes the free descriptor, and what is printed to stderr lands in
// it (the folder's lock took fd 2). A closed standard output is refused: nothing could be printed.
bool standard_descriptors_open() {
  bool output_open = true;
  for (const int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    if (fd == STDOUT_FILENO) output_open = false;
    const int opened = open("/dev/null", fd == STDIN_FILENO ? O_RDONLY : O_WRONLY);
    if (opened != fd && opened != -1) close(opened);  // not the lowest free: leave it closed
  }
  return output_open;
}

}  // namespace

int main(int argc, char** argv) {
  const int exit_code = standard_descriptors_open()
                            ? run_command(argc, argv)
                            : bad_input("standard output is closed: nothing could be printed");
  // Out without the libraries' exit handlers: OpenBLAS joins its server threads in one, and a
  // thread that could not allocate its buffer (under a low `ulimit -v`) never returns, so every
  // command, its work done and written, hung at exit spinning a core. Nothing of ours is left to
  // run by then: run_command's folders and files are closed and stdout was flushed and checked
  // (flushed again here for the error paths, whose message went to unbuffered stderr).
  std::fflush(nullptr);
  std::_Exit(exit_code);
}
