// The machine's load average, read before a run: a benchmark shares the CPU with whatever else
// is runnable, and the load average is the cheapest sign that something is.
#pragma once

#include <optional>
#include <string>

namespace attnbench {

struct LoadAverage {
  double one_minute = 0;
  double five_minutes = 0;
  double fifteen_minutes = 0;
};

// /proc/loadavg, or the file named by ATTNBENCH_LOADAVG (so a test can show a busy machine
// without making one); nothing when it cannot be read or is not a regular file (a FIFO or a
// device is never waited on or read without end).
std::optional<LoadAverage> read_load_average();

// Reads "1.23 0.50 0.10 1/123 4567"; nothing for text that is not a load average.
std::optional<LoadAverage> parse_load_average(const std::string& text);

// Runnable processes above this, averaged over the last minute, are other work: a quiet machine
// idles near 0 (the run itself has barely started when this is read).
inline constexpr double busy_load_average = 0.5;

// The warning `run` prints at its start, or empty when the machine looks quiet; what it says of
// the peaks follows `peaks_checked` (false under measure.peaks = "skip", when none are).
std::string load_warning(const LoadAverage& load, int cpus, bool peaks_checked = true);

}  // namespace attnbench
