// The correctness oracle: a float64 reference and the comparison every variant must pass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/executor.h"
#include "harness/tolerance.h"

namespace attnbench {

struct OracleOptions {
  int64_t full_check_max_n = 512;  // above this seq_q or seq_kv, compare sampled rows only
  int64_t sample_rows = 32;        // (batch, head, row) triples compared when sampling
  uint64_t sample_seed = 1;
};

struct OracleReport {
  bool passed = false;
  std::string failure;  // one line; empty when passed
  double max_abs_err = 0;
  double rel_l2_err = 0;
  double weights_max_abs_err = 0;  // when weights were checked
  double weights_max_row_sum_err = 0;
  int64_t rows_checked = 0;
  bool sampled = false;
  double max_abs_score = 0;     // largest |scale * q.k| over the checked rows
  double rel_l2_tolerance = 0;  // the tolerance applied, after score conditioning
};

// One row of the float64 reference: o = softmax(scale * K q + mask) V for query (b, h, row),
// written like the math. `weights` (seq_kv values) and `max_abs_score` may be null.
void reference_row(const HostTensors& inputs, double scale, int64_t batch, int64_t head,
                   int64_t row, std::vector<double>& o, std::vector<double>* weights,
                   double* max_abs_score = nullptr);

// The whole reference output [batch, heads, seq_q, d_v] (and weights when asked), in float64.
std::vector<double> reference_output(const HostTensors& inputs, double scale,
                                     std::vector<double>* weights = nullptr);

// Compares a variant's output (and weights, when given) with the reference.
OracleReport check_against_reference(const HostTensors& inputs, double scale,
                                     const std::vector<float>& o, const std::vector<float>* weights,
                                     Precision precision, const OracleOptions& options);

}  // namespace attnbench
