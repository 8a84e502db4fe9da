// What the oracle found for one checked run.
#pragma once

#include <cstdint>
#include <string>

namespace attnbench {

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

}  // namespace attnbench
