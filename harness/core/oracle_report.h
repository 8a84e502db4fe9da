// What the oracle found for one checked run.
#pragma once

#include <cstdint>
#include <string>

namespace attnbench {

// One compared element: where it is (the column is the output's d index, or the key of a
// weight), what the variant wrote and what the reference holds.
struct ElementError {
  int64_t batch = 0, head = 0, row = 0, column = 0;
  double got = 0, reference = 0;
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
  ElementError worst_output;    // the output element with the largest absolute error
};

}  // namespace attnbench
