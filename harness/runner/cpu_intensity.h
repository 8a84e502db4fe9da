// The lowest arithmetic intensity of a sweep's CPU cases: what decides whether a run's peak
// checks measure the memory bandwidth (decide_bandwidth, harness/measure/cpu_peak.h). Here, not
// in results/, because telling CPU cases from others needs the variant registry.
#pragma once

#include <vector>

#include "harness/core/case.h"

namespace attnbench {

// Forward FLOPs over the fewest bytes, the lowest among the cases whose variant runs on the
// CPU; infinity when there is none.
double lowest_cpu_intensity(const std::vector<Case>& cases);

}  // namespace attnbench
