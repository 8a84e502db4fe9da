// libFuzzer target: the config loader. Any input, as a config file and (after a line "---") as
// --set overrides, must either load or throw ConfigError; anything else escaping, a crash or a
// sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/plan/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const std::string separator = "\n---\n";
  const std::size_t split = input.find(separator);
  std::vector<std::string> overrides;
  if (split != std::string::npos) {
    std::size_t start = split + separator.size();
    while (start <= input.size()) {
      const std::size_t end = std::min(input.find('\n', start), input.size());
      overrides.push_back(input.substr(start, end - start));
      start = end + 1;
    }
  }
  try {
    attnbench::parse_config(input.substr(0, split), "fuzz.toml", overrides);
  } catch (const attnbench::ConfigError&) {
  }
  return 0;
}
