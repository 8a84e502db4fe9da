// What a sweep prints while it runs: a readable table on stdout, one row per case, and a
// progress line on stderr (case i of N, elapsed, estimated remaining). Its "% of peak" and
// "disturbed" come from rate_record(), as every reader's do.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/core/record.h"
#include "harness/results/peak_checks.h"

namespace attnbench {

class TerminalReport {
 public:
  explicit TerminalReport(int64_t total_cases);
  void header() const;
  // Which roof "% peak" reads each dtype of the run's CPU cases against, and its best check so
  // far: "% peak: fp32 against cpu_fma_gflops 236.2, bf16 against cpu_bf16_dot_gflops 472.4
  // GFLOP/s ...". Under the header, and again (`final`) after the end check.
  void roofs(const std::vector<std::string>& cpu_dtypes, const PeakChecks& checks,
             bool final) const;
  // After the end check, the rows whose % of peak the final checks changed (a higher check came
  // after they were printed): variant, shape, the % shown and the % every reader now gives.
  struct Rerated {
    std::string variant, shape;
    double shown = 0, final = 0;
  };
  void rerated(const std::vector<Rerated>& rows) const;
  // `rated`: the record through rate_record() against the folder's checks so far.
  void row(const CaseRecord& record, const nlohmann::ordered_json& rated) const;
  // A row of `attnbench check`: the status and the oracle's errors, or the reason.
  void check_row(const CaseRecord& record) const;
  // Call after each case, finished or skipped.
  void progress(int64_t done);
  // After the end check: each peak's checks and whether they agree, whether the end check moved
  // the best that the rows above were rated against, and how many of the session's records are
  // flagged as disturbed.
  void peak_summary(const PeakChecks& before_end, const PeakChecks& checks, int64_t disturbed,
                    int64_t records) const;
  // The end of the table: each disturbed reason once, numbered as the rows cite it.
  void finish() const;

 private:
  // Disturbed reasons, each once, in the order rows first cited them: a row says "(disturbed
  // [2])", not its reason again (a reason can run to hundreds of characters).
  mutable std::vector<std::string> disturbed_reasons_;
  int64_t total_;
  std::chrono::steady_clock::time_point start_;
  bool interactive_;
};

// What TerminalReport::roofs and ::rerated print ("" for nothing to say).
std::string roofs_text(const std::vector<std::string>& cpu_dtypes, const PeakChecks& checks,
                       bool final);
std::string rerated_text(const std::vector<TerminalReport::Rerated>& rows);

// "1h02m", "3m05s", "12.3s", "45.6ms", "7.89us"
std::string format_duration(double seconds);

}  // namespace attnbench
