#include "harness/results/output_files.h"

#include <fmt/format.h>

#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "harness/results/regular_file.h"

namespace attnbench {

namespace {

namespace fs = std::filesystem;

// One file under two spellings (f.npy, ./f.npy, sub/../f.npy, $PWD/f.npy) is one location: a
// file that does not exist yet is compared by its directory's identity and its name, since
// weakly_canonical leaves a relative path with no existing prefix relative ("f.npy" against
// "/cwd/f.npy") and the second write would land on the first.
bool same_file(const std::string& a, const std::string& b) {
  std::error_code error;
  if (fs::exists(a, error) && fs::exists(b, error)) return fs::equivalent(a, b, error);
  const fs::path located_a = fs::weakly_canonical(fs::absolute(a, error), error);
  const fs::path located_b = fs::weakly_canonical(fs::absolute(b, error), error);
  if (located_a.filename() != located_b.filename()) return false;
  const fs::path folder_a = located_a.parent_path(), folder_b = located_b.parent_path();
  if (fs::exists(folder_a, error) && fs::exists(folder_b, error))
    return fs::equivalent(folder_a, folder_b, error);
  return located_a == located_b;
}

}  // namespace

void require_distinct_outputs(const char* command, const std::vector<FlagPath>& outputs,
                              const std::vector<FlagPath>& inputs) {
  for (const auto& [output_flag, output] : outputs) {
    if (output.empty()) continue;
    for (const auto& [input_flag, input] : inputs) {
      if (!input.empty() && same_file(output, input)) {
        throw std::runtime_error(fmt::format("{} {} is also {}: {} does not overwrite its inputs",
                                             output_flag, output, input_flag, command));
      }
    }
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    for (std::size_t j = i + 1; j < outputs.size(); ++j) {
      const auto& [first_flag, first] = outputs[i];
      const auto& [second_flag, second] = outputs[j];
      if (!first.empty() && !second.empty() && same_file(first, second)) {
        throw std::runtime_error(fmt::format("{} and {} name the same file ({}); give two",
                                             first_flag, second_flag, first));
      }
    }
  }
}

void require_regular_outputs(const std::vector<FlagPath>& outputs) {
  for (const FlagPath& output : outputs) {
    if (!output.path.empty()) require_regular_or_absent(output.path);
  }
}

}  // namespace attnbench
