// The reporter that prints a sweep: the roofs and the table (TerminalReport), a row and the
// progress line per case, and after the end check the peak summary and the rows the final checks
// rate differently from what was printed.
#pragma once

#include <vector>

#include "harness/results/terminal_report.h"
#include "harness/runner/sweep_reporter.h"

namespace attnbench {

class TerminalReporter final : public SweepReporter {
 public:
  explicit TerminalReporter(int64_t total_cases) : report_(total_cases) {}
  void run_started(const RunStarted& event) override;
  void case_finished(const CaseFinished& event) override;
  void run_ended(const RunEnded& event) override;

 private:
  // The rows whose % of peak the final checks change by a printable amount.
  std::vector<TerminalReport::Rerated> rerated_rows(const PeakChecks& checks) const;

  TerminalReport report_;
  std::vector<std::string> cpu_dtypes_;
  int64_t done_ = 0;
  // Each session record as stored, and its row as shown: % of peak (-1 when none).
  std::vector<nlohmann::ordered_json> session_;
  std::vector<TerminalReport::Rerated> shown_;
};

}  // namespace attnbench
