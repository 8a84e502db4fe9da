#include "harness/runner/terminal_reporter.h"

#include <fmt/format.h>

#include <cmath>

namespace attnbench {

namespace {

double percent_of_peak(const nlohmann::ordered_json& rated) {
  return rated["percent_of_peak"].is_number() ? rated["percent_of_peak"].get<double>() : -1.0;
}

}  // namespace

void TerminalReporter::run_started(const RunStarted& event) {
  cpu_dtypes_ = event.cpu_dtypes;
  done_ = event.already_done;
  report_.roofs(cpu_dtypes_, *event.checks, false);
  report_.header();
}

void TerminalReporter::case_finished(const CaseFinished& event) {
  const CaseRecord& record = *event.record;
  // Rated as every reader rates it, against the folder's checks as they stand.
  const nlohmann::ordered_json rated = rate_record(*event.stored, *event.checks);
  report_.row(record, rated);
  shown_.push_back(
      {record.sweep_case.variant, describe(record.sweep_case.shape), percent_of_peak(rated)});
  session_.push_back(*event.stored);
  report_.progress(++done_);
}

std::vector<TerminalReport::Rerated> TerminalReporter::rerated_rows(
    const PeakChecks& checks) const {
  std::vector<TerminalReport::Rerated> rerated;
  for (std::size_t i = 0; i < session_.size(); ++i) {
    const double final = percent_of_peak(rate_record(session_[i], checks));
    // A change under 0.05 points would print as the same number.
    if (final >= 0 && shown_[i].shown >= 0 && std::abs(final - shown_[i].shown) >= 0.05) {
      rerated.push_back(shown_[i]);
      rerated.back().final = final;
    }
  }
  return rerated;
}

void TerminalReporter::run_ended(const RunEnded& event) {
  report_.finish();
  if (event.checks != nullptr) {
    report_.peak_summary(*event.before_end, *event.checks, event.disturbed, event.session_records);
    report_.rerated(rerated_rows(*event.checks));
    report_.roofs(cpu_dtypes_, *event.checks, true);
  }
  if (event.session_records > 0 && event.peaks_skipped)
    fmt::print("no peak checks (measure.peaks = skip): no record is rated against a peak\n");
}

}  // namespace attnbench
