// The machine's memory bandwidth, STREAM-triad style: the roof that decode (seq_q far below
// seq_kv, every K/V byte read once) runs under, measured beside the FMA peak and re-checked with
// it, so a decode record's "% of bandwidth" reads against what this machine moves, not a
// datasheet number.
#pragma once

#include <cstdint>

namespace attnbench {

struct TriadBandwidth {
  double best_gbps = 0;       // the best trial: what the machine can move
  double sustained_gbps = 0;  // over all trials: what a program got while it was measured
  int64_t array_bytes = 0;    // each of the three arrays
};

// a[i] = b[i] + s * c[i] over three float arrays, each at least four times the last-level cache
// (and at least 64 MiB), on `threads` OpenMP threads with first-touch placement by the same
// threads. Bytes counted as STREAM counts them: 12 per element (two reads, one write; the write's
// read-for-ownership is not counted). About a quarter of a second; allocates 3 * array_bytes, at
// most half the memory this process may still allocate. Where that leaves under 64 MiB per array
// nothing is measured: best_gbps, sustained_gbps and array_bytes stay 0 (readers show no
// bandwidth roof then).
TriadBandwidth measure_triad_bandwidth(int threads);

}  // namespace attnbench
