// The machine's memory bandwidth, STREAM-triad style and read-only: the roofs that decode (seq_q
// far below seq_kv, every K/V byte read once) runs under, measured beside the FMA peak and
// re-checked with it, so a decode record's "% of bandwidth" reads against what this machine
// moves, not a datasheet number. Decode only reads, and a core reads faster than it reads and
// writes (no stores to drain, no read-for-ownership): the read roof is the one it can reach.
#pragma once

#include <cstdint>
#include <string>

namespace attnbench {

struct TriadBandwidth {
  double best_gbps = 0;       // the best trial: what the machine can move
  double sustained_gbps = 0;  // over all trials: what a program got while it was measured
  int64_t array_bytes = 0;    // each of the three arrays
  int trials = 0;             // trials run within the time budget
  double budget_ms = 0;       // the time budget of the trials (first touch not counted)
  // The read-only check on the same arrays (a sum over all three), right after the triad's
  // trials: best trial, rate over all trials, trials within read_budget_ms.
  double read_best_gbps = 0;
  double read_sustained_gbps = 0;
  int read_trials = 0;
  double read_budget_ms = 0;
  double elapsed_ms = 0;  // the whole check, allocation and first touch included
  // The instruction that evicted the arrays from every cache level before each trial
  // (cache_eviction.h), or "" where this build has none: the trials then follow each other warm.
  std::string eviction;
  // Why the arrays are the size they are ("4x the 32 MiB last-level cache, over three arrays",
  // "capped at 64 MiB ...", or why nothing was measured).
  std::string sizing;
};

// Each of the three arrays: four times the last-level cache over the three (so no trial finds
// them cached, even before the eviction measure_triad_bandwidth does before each trial), at least
// triad_min_array_bytes, at most triad_max_array_bytes (a 2-core VM may report a host's whole
// shared cache, 300-480 MiB: the cap keeps a run's memory near 200 MiB and the check under a
// second where clflushopt evicts, and the eviction keeps a cache that could hold the capped
// arrays, as a quiet 300 MiB L3 did, from serving the trials), and never more than half of what
// this process may still allocate, over three, nor more than keeps the process (`resident` bytes
// before the check) within triad_process_budget_bytes: a run's fixed cost stays small even where
// the process already holds much (a GPU run's CUDA context and cuBLAS). 0 when that leaves under
// the minimum (three arrays of 24 MiB still stream from memory past a 32 MiB L3), with the reason
// in `sizing`.
inline constexpr int64_t triad_min_array_bytes = int64_t{24} << 20;
inline constexpr int64_t triad_max_array_bytes = int64_t{64} << 20;
inline constexpr int64_t triad_process_budget_bytes = int64_t{300} << 20;
TriadBandwidth size_triad(int64_t last_level_cache_bytes, int64_t available_bytes,
                          int64_t resident_bytes = 0);

// This process's resident memory now (/proc/self/statm); 0 where it cannot be read.
int64_t resident_bytes_now();

// a[i] = b[i] + s * c[i] over three float arrays sized by size_triad, on `threads` OpenMP
// threads with first-touch placement by the same threads. Bytes counted as STREAM counts them: 12
// per element (two reads, one write; the write's read-for-ownership is not counted). Trials run
// until `budget_ms` has passed (at least 5, at most 1000): about 0.1 s plus the first touch of
// 192 MiB at most. Then a sum over the three arrays (4 bytes read per element, nothing written)
// for `read_budget_ms` (same trial bounds). Before every trial of either, the arrays are evicted
// from every cache level (cache_eviction.h; not in the trial's rate, but in the time budget: at
// least 5 trials of each, so a CPU with only the serialised clflush, about 60x slower than
// clflushopt, spends about 1.5 s more per check), so each trial reads memory. Where the
// arrays would be under the minimum nothing is measured: every rate and array_bytes stay 0 (readers
// show no bandwidth roof then). `within_process_budget`: size the arrays so the process stays
// within triad_process_budget_bytes (a run's start check: its fixed cost). A later check passes
// false: by then the process holds what the run's own cases needed (a decode run's caches, kept by
// the allocator), and the budget would leave no room for any bandwidth check at all.
TriadBandwidth measure_triad_bandwidth(int threads, double budget_ms = 100,
                                       double read_budget_ms = 60,
                                       bool within_process_budget = true);

}  // namespace attnbench
