// What the oracle compares: every row of small problems, a seeded sample of rows of large ones.
#pragma once

#include <cstdint>

namespace attnbench {

struct OracleOptions {
  int64_t full_check_max_n = 512;  // above this seq_q or seq_kv, compare sampled rows only
  int64_t sample_rows = 32;        // (batch, head, row) triples compared when sampling
  uint64_t sample_seed = 1;
};

}  // namespace attnbench
