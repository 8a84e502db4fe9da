// The start check of a run, taken again while other work disturbs it. Every record of a run is
// read against its checks; a start check taken beside another process reads the roof low, and
// the live table then rates the first rows against it. A check knows when it was disturbed: its
// FMA loop sustained well under its own best trial (the best trial ran between the other
// process's time slices, the rest did not). Such a check is retaken after a short pause, a few
// times, before the run starts; the manifest says how many attempts it took and whether one
// came out clean.
#pragma once

#include <functional>
#include <string>

#include "harness/measure/cpu_peak.h"

namespace attnbench {

inline constexpr int start_check_attempts = 3;
// A check ran alone when its FMA loop sustained at least this fraction of its best trial (the
// readers flag checks further apart than 10%: peak_disagreement_limit).
inline constexpr double alone_sustained_fraction = 0.9;
inline constexpr int start_check_pause_ms = 200;

// Sustained over best FMA rate of one check; 0 when it measured nothing.
double sustained_fraction(const CpuPeaks& peaks);
bool ran_alone(const CpuPeaks& peaks);

struct StartPeaks {
  CpuPeaks peaks;    // the clean attempt, else the least disturbed one
  int attempts = 0;  // checks taken
  bool clean = false;
  // "" when the first attempt was clean; else what happened, for the manifest and the terminal:
  // "clean on attempt 2 of 3 (the FMA loop sustained 61%, 93% of its best)" or "no clean check
  // in 3 attempts (...): records will read disturbed".
  std::string note;
};

// `measure` up to `attempts` times, `pause_ms` apart, until a check ran alone.
StartPeaks measure_start_peaks(const std::function<CpuPeaks()>& measure,
                               int attempts = start_check_attempts,
                               int pause_ms = start_check_pause_ms);

}  // namespace attnbench
