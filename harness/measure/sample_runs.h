// How many back-to-back passes one timing sample holds. A pass timed alone on an idle stream
// carries the host's launch latency (several microseconds a launch; cuBLAS in bshd enqueues
// 2 * batch * group + 1): below ~100 µs that is a large part of what is measured. Passes queued
// back to back overlap their launches with the work before them, so a sample of enough of them
// times the device alone.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace attnbench {

// A sample lasts at least this long.
inline constexpr double min_sample_ms = 1.0;
// And holds at most this many passes (a pass below 1 µs, or one too short for the timer to see).
inline constexpr int64_t max_runs_per_sample = 1024;

// The passes a sample needs to last sample_ms, from the time of one pass: at least 1, at most
// max_runs.
inline int64_t runs_per_sample(double run_ms, double sample_ms = min_sample_ms,
                               int64_t max_runs = max_runs_per_sample) {
  if (!(run_ms > 0)) return max_runs;  // zero (under the timer's resolution) or not a number
  const double runs = std::ceil(sample_ms / run_ms);
  return static_cast<int64_t>(std::clamp(runs, 1.0, static_cast<double>(max_runs)));
}

}  // namespace attnbench
