#include "harness/results/terminal_report.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "harness/core/diagnostic.h"
#include "harness/measure/memory_limit.h"

namespace attnbench {

std::string format_duration(double seconds) {
  // Under a tenth of a second in milli- or microseconds: "0.0s" beside a budget of 1e-09 s
  // said nothing about why the case was over it.
  if (seconds > 0 && seconds < 1e-3) return fmt::format("{:.3g}us", seconds * 1e6);
  if (seconds > 0 && seconds < 0.1) return fmt::format("{:.3g}ms", seconds * 1e3);
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  const auto whole = static_cast<int64_t>(seconds);
  if (whole < 3600) return fmt::format("{}m{:02}s", whole / 60, whole % 60);
  return fmt::format("{}h{:02}m", whole / 3600, (whole % 3600) / 60);
}

TerminalReport::TerminalReport(int64_t total_cases)
    : total_(total_cases),
      start_(std::chrono::steady_clock::now()),
      interactive_(isatty(STDERR_FILENO) != 0) {}

void TerminalReport::header() const {
  fmt::print("{:<13} {:<36} {:<7} {:>10} {:>7} {:>6} {:>9} {:>7} {:>6} {:>10} {:>9}\n", "variant",
             "shape", "status", "median ms", "±ci %", "cv", "GFLOP/s", "% peak", "% bw",
             "workspace", "rel err");
  std::fflush(stdout);
}

std::string roofs_text(const std::vector<std::string>& cpu_dtypes, const PeakChecks& checks,
                       bool final) {
  if (cpu_dtypes.empty() || checks.best("cpu_fma_gflops") <= 0) return {};
  std::string text;
  for (const std::string& dtype : cpu_dtypes) {
    const std::string roof = checks.cpu_roof(dtype);
    text += fmt::format("{}{} against {} {:.4g}", text.empty() ? "" : ", ", dtype, roof,
                        checks.best(roof));
  }
  return fmt::format("% peak{}: {} GFLOP/s (one roof per dtype: the best check of it{})\n",
                     final ? " as every reader of the folder rates it" : "", text,
                     final ? "" : " so far; rows a later check re-rates are listed at the end");
}

std::string rerated_text(const std::vector<TerminalReport::Rerated>& rows) {
  if (rows.empty()) return {};
  constexpr std::size_t listed = 20;
  std::string text = fmt::format(
      "{} row(s) above were rated against a roof a later check raised; their % peak now:\n",
      rows.size());
  for (std::size_t i = 0; i < rows.size() && i < listed; ++i) {
    text += fmt::format("  {:<13} {:<36} {:>7.1f} -> {:.1f}\n", rows[i].variant, rows[i].shape,
                        rows[i].shown, rows[i].final);
  }
  if (rows.size() > listed)
    text += fmt::format("  ... and {} more (summary.csv holds every record's final rating)\n",
                        rows.size() - listed);
  return text;
}

void TerminalReport::roofs(const std::vector<std::string>& cpu_dtypes, const PeakChecks& checks,
                           bool final) const {
  fmt::print("{}", roofs_text(cpu_dtypes, checks, final));
  std::fflush(stdout);
}

void TerminalReport::rerated(const std::vector<Rerated>& rows) const {
  fmt::print("{}", rerated_text(rows));
}

void TerminalReport::row(const CaseRecord& r, const nlohmann::ordered_json& rated) const {
  if (interactive_) print_diagnostic("\r\033[K");
  const std::string shape = describe(r.sweep_case.shape);
  if (r.status != CaseStatus::ok) {
    fmt::print("{:<13} {:<36} {:<7} {}\n", r.sweep_case.variant, shape, to_string(r.status),
               r.reason);
  } else {
    const double gflops = record_gflops(r);
    // As every reader rates the record: "% bw" only below the ridge, where bandwidth bounds it.
    const auto percent_cell = [&rated](const char* field) {
      const auto& value = rated[field];
      return value.is_number() ? fmt::format("{:.1f}", value.get<double>()) : std::string("-");
    };
    // The median's 95% interval, and a mark where the stopping rule gave up before its target.
    std::string interval = r.timing->ci_valid
                               ? fmt::format("{:.2f}", 100 * r.timing->rel_ci_half_width)
                               : std::string("-");
    if (r.timing->target_rel_ci > 0 && !r.timing->target_reached) interval += "!";
    std::string notes;
    if (r.timing->cv > noisy_cv) notes += "  (noisy)";
    if (rated["disturbed"] == true) {
      const std::string reason = rated["disturbed_reason"].get<std::string>();
      auto found = std::find(disturbed_reasons_.begin(), disturbed_reasons_.end(), reason);
      if (found == disturbed_reasons_.end())
        found = disturbed_reasons_.insert(disturbed_reasons_.end(), reason);
      notes += fmt::format("  (disturbed [{}])", found - disturbed_reasons_.begin() + 1);
    }
    fmt::print(
        "{:<13} {:<36} {:<7} {:>10.4g} {:>7} {:>6.3f} {:>9.2f} {:>7} {:>6} {:>10} {:>9.2g}{}\n",
        r.sweep_case.variant, shape, "ok", r.timing->median_ms, interval, r.timing->cv, gflops,
        percent_cell("percent_of_peak"), percent_cell("percent_of_bandwidth"),
        memory_text(static_cast<double>(r.workspace_bytes.value_or(0))), r.oracle->rel_l2_err,
        notes);
  }
  std::fflush(stdout);
}

void TerminalReport::check_row(const CaseRecord& r) const {
  if (interactive_) print_diagnostic("\r\033[K");
  std::string detail = r.reason;
  if (r.status == CaseStatus::ok && r.oracle) {
    detail = fmt::format("rel L2 {:.2g}, max abs {:.2g}{}", r.oracle->rel_l2_err,
                         r.oracle->max_abs_err, r.oracle->sampled ? " (sampled rows)" : "");
  }
  // Each line is one distribution's check, named beside its own errors.
  fmt::print("{:<13} {:<36} {:<13} {:<7} {}\n", r.sweep_case.variant, describe(r.sweep_case.shape),
             r.distribution, to_string(r.status), detail);
  std::fflush(stdout);
}

void TerminalReport::progress(int64_t done) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double remaining =
      done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total_ - done) : 0;
  const std::string line = fmt::format("[{}/{}] {} elapsed, ~{} remaining", done, total_,
                                       format_duration(elapsed), format_duration(remaining));
  if (interactive_) {
    print_diagnostic("\r\033[K{}", line);
  } else {
    print_diagnostic("{}\n", line);
  }
}

void TerminalReport::peak_summary(const PeakChecks& before_end, const PeakChecks& checks,
                                  int64_t disturbed, int64_t records) const {
  for (const char* name : {"cpu_fma_gflops", "cpu_bf16_dot_gflops", "cpu_amx_bf16_gflops"}) {
    std::string values;
    for (const PeakCheck& check : checks.checks()) {
      const std::string peak = name;
      const double value = peak == "cpu_fma_gflops"        ? check.cpu_fma_gflops
                           : peak == "cpu_bf16_dot_gflops" ? check.cpu_bf16_dot_gflops
                                                           : check.cpu_amx_bf16_gflops;
      if (value > 0)
        values += fmt::format("{}{:.4g} ({})", values.empty() ? "" : ", ", value, check.when);
    }
    if (values.empty()) continue;
    const std::string disagreement = checks.disagreement(name);
    fmt::print("peak checks, {}: {} GFLOP/s; % of peak is against the best{}\n", name, values,
               disagreement.empty() ? "" : ": DISAGREE by over 10%");
    // Raised visibly: a rise under the printed precision changes no row's reading.
    if (before_end.best(name) > 0 && checks.best(name) > before_end.best(name) &&
        fmt::format("{:.4g}", checks.best(name)) != fmt::format("{:.4g}", before_end.best(name))) {
      fmt::print(
          "the end check raised the best {} from {:.4g} to {:.4g} GFLOP/s: the rows above read "
          "% of peak against {:.4g}; summary.csv and every reader of the folder against {:.4g}\n",
          name, before_end.best(name), checks.best(name), before_end.best(name), checks.best(name));
    }
  }
  std::string bandwidth;
  for (const PeakCheck& check : checks.checks()) {
    if (check.cpu_triad_gbps > 0 || check.cpu_read_gbps > 0)
      bandwidth += fmt::format("{}{:.4g}/{:.4g} ({})", bandwidth.empty() ? "" : ", ",
                               check.cpu_read_gbps, check.cpu_triad_gbps, check.when);
  }
  if (!bandwidth.empty()) {
    fmt::print("peak checks, cpu_read_gbps/cpu_triad_gbps: {} GB/s; % bw is against the best, {}\n",
               bandwidth, checks.bandwidth_roof("cpu").name);
  }
  if (const std::string busy = checks.busy_checks(); !busy.empty())
    fmt::print("peak checks: {}\n", busy);
  if (disturbed > 0) {
    fmt::print("{} of {} records flagged disturbed (see disturbed_reason in summary.csv)\n",
               disturbed, records);
  }
  std::fflush(stdout);
}

void TerminalReport::finish() const {
  if (interactive_) print_diagnostic("\n");
  for (std::size_t i = 0; i < disturbed_reasons_.size(); ++i)
    fmt::print("[{}] disturbed: {}\n", i + 1, disturbed_reasons_[i]);
  std::fflush(stdout);
}

}  // namespace attnbench
