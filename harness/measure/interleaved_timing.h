// Timing several variants of one shape in rounds, A B C A B C ..., one Google Benchmark
// repetition each per round. Timed minutes apart, two variants each meet their own noise and
// their ratio carries both; timed in alternation, a disturbance lands on both within seconds,
// so the per-round ratios share it and the ratio stays steady while the times move.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "harness/core/timing_stats.h"
#include "harness/measure/timing.h"

namespace attnbench {

// Which variant runs at each step of round `round` (0-based): all of them, in the listed order.
std::vector<std::size_t> round_order(std::size_t variants, int64_t round);

// Runs rounds of `time_round(i)` (one repetition of variant i, already warmed up) until each
// variant has options.repetitions rounds and, with a target, every variant's median interval
// meets it or options.max_time_s per variant is spent. Returns each variant's statistics, with
// one repetition mean per round, in round order. Throws what time_round throws.
std::vector<TimingStats> time_interleaved(std::size_t variants, const TimingOptions& options,
                                          const std::function<TimedBatch(std::size_t)>& time_round);

}  // namespace attnbench
