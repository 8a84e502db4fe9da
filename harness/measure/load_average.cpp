#include "harness/measure/load_average.h"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace attnbench {

std::optional<LoadAverage> parse_load_average(const std::string& text) {
  std::istringstream in(text);
  LoadAverage load;
  if (!(in >> load.one_minute >> load.five_minutes >> load.fifteen_minutes)) return std::nullopt;
  if (load.one_minute < 0 || load.five_minutes < 0 || load.fifteen_minutes < 0) return std::nullopt;
  return load;
}

std::optional<LoadAverage> read_load_average() {
  const char* override_path = std::getenv("ATTNBENCH_LOADAVG");
  std::ifstream file(override_path != nullptr ? override_path : "/proc/loadavg");
  if (!file) return std::nullopt;
  std::string line;
  std::getline(file, line);
  return parse_load_average(line);
}

std::string load_warning(const LoadAverage& load, int cpus) {
  if (load.one_minute < busy_load_average) return {};
  return fmt::format(
      "load average {:.2f} (1 min) on {} CPUs: other work is running, so times and peaks may be "
      "disturbed; the peaks are re-checked at the end and disagreeing runs are flagged",
      load.one_minute, cpus);
}

}  // namespace attnbench
