#include "harness/measure/load_average.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
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
  const char* path = override_path != nullptr ? override_path : "/proc/loadavg";
  // Opened without blocking and read only if it is a regular file (a FIFO would wait for a
  // writer forever, /dev/zero never ends), and never more than a load average's line can hold.
  const int descriptor = ::open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (descriptor < 0) return std::nullopt;
  struct stat status {};
  std::optional<LoadAverage> load;
  if (::fstat(descriptor, &status) == 0 && S_ISREG(status.st_mode)) {
    std::array<char, 256> text{};
    const ssize_t length = ::read(descriptor, text.data(), text.size() - 1);
    if (length > 0) {
      const std::string content(text.data(), static_cast<std::size_t>(length));
      load = parse_load_average(content.substr(0, content.find('\n')));
    }
  }
  ::close(descriptor);
  return load;
}

std::string load_warning(const LoadAverage& load, int cpus, bool peaks_checked) {
  if (load.one_minute < busy_load_average) return {};
  return fmt::format(
      "load average {:.2f} (1 min) on {} CPUs: other work is running, so {} may be disturbed{}",
      load.one_minute, cpus, peaks_checked ? "times and peaks" : "times",
      peaks_checked ? "; the peaks are re-checked at the end and disagreeing runs are flagged"
                    : " (measure.peaks = \"skip\": nothing checks the machine for it)");
}

}  // namespace attnbench
