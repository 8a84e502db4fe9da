#include "harness/results/peak_checks.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "harness/measure/cpu_peak.h"
#include "harness/measure/load_average.h"

namespace attnbench {

namespace {

constexpr const char* fma_name = "cpu_fma_gflops";
constexpr const char* bf16_name = "cpu_bf16_dot_gflops";

// The value of one peak in a check; 0 when that check has none.
double value_of(const PeakCheck& check, const std::string& peak_name) {
  if (peak_name == fma_name) return check.cpu_fma_gflops;
  if (peak_name == bf16_name) return check.cpu_bf16_dot_gflops;
  return 0;
}

}  // namespace

double PeakChecks::best(const std::string& peak_name) const {
  double best = 0;
  for (const PeakCheck& check : checks_) best = std::max(best, value_of(check, peak_name));
  return best;
}

std::string PeakChecks::disagreement(const std::string& peak_name) const {
  const PeakCheck* lowest = nullptr;
  const PeakCheck* highest = nullptr;
  for (const PeakCheck& check : checks_) {
    if (value_of(check, peak_name) <= 0) continue;
    if (!lowest || value_of(check, peak_name) < value_of(*lowest, peak_name)) lowest = &check;
    if (!highest || value_of(check, peak_name) > value_of(*highest, peak_name)) highest = &check;
  }
  if (!lowest || lowest == highest) return {};
  const double low = value_of(*lowest, peak_name), high = value_of(*highest, peak_name);
  if (high / low - 1 <= peak_disagreement_limit) return {};
  return fmt::format("{} checks disagree: {:.4g} ({}) to {:.4g} ({}) GFLOP/s, {:.0f}% apart",
                     peak_name, low, lowest->when, high, highest->when, 100 * (high / low - 1));
}

std::string PeakChecks::busy_checks() const {
  std::string text;
  for (const PeakCheck& check : checks_) {
    if (check.cpu_fma_gflops <= 0 || check.cpu_fma_sustained_gflops <= 0) continue;
    if (check.cpu_fma_sustained_gflops >= (1 - peak_disagreement_limit) * check.cpu_fma_gflops)
      continue;
    text += fmt::format(
        "{}other work ran during the {} check: the FMA loop sustained {:.4g} of its best {:.4g} "
        "GFLOP/s ({:.0f}%)",
        text.empty() ? "" : "; ", check.when, check.cpu_fma_sustained_gflops, check.cpu_fma_gflops,
        100 * check.cpu_fma_sustained_gflops / check.cpu_fma_gflops);
  }
  return text;
}

std::string PeakChecks::doubts(const std::string& peak_name) const {
  const std::string disagree = disagreement(peak_name);
  const std::string busy = busy_checks();
  return disagree.empty() || busy.empty() ? disagree + busy : disagree + "; " + busy;
}

nlohmann::ordered_json PeakChecks::to_json() const {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const PeakCheck& check : checks_) {
    list.push_back({{"when", check.when},
                    {"date", check.date},
                    {fma_name, check.cpu_fma_gflops},
                    {"cpu_fma_sustained_gflops", check.cpu_fma_sustained_gflops},
                    {bf16_name, check.cpu_bf16_dot_gflops > 0
                                    ? nlohmann::ordered_json(check.cpu_bf16_dot_gflops)
                                    : nlohmann::ordered_json(nullptr)},
                    {"load_1min", check.load_1min ? nlohmann::ordered_json(*check.load_1min)
                                                  : nlohmann::ordered_json(nullptr)}});
  }
  return list;
}

PeakChecks PeakChecks::from_json(const nlohmann::ordered_json& list) {
  PeakChecks checks;
  if (!list.is_array()) return checks;
  auto number = [](const nlohmann::ordered_json& object, const char* key) {
    return object.contains(key) && object[key].is_number() ? object[key].get<double>() : 0.0;
  };
  for (const auto& entry : list) {
    if (!entry.is_object()) continue;
    PeakCheck check;
    check.when = entry.value("when", "");
    check.date = entry.value("date", "");
    check.cpu_fma_gflops = number(entry, fma_name);
    check.cpu_fma_sustained_gflops = number(entry, "cpu_fma_sustained_gflops");
    check.cpu_bf16_dot_gflops = number(entry, bf16_name);
    if (entry.contains("load_1min") && entry["load_1min"].is_number())
      check.load_1min = entry["load_1min"].get<double>();
    checks.add(check);
  }
  return checks;
}

PeakCheck measure_peak_check(const std::string& when) {
  PeakCheck check;
  check.when = when;
  check.date = fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::chrono::system_clock::now()));
  // Read before measuring: the measurement itself keeps every core busy for a moment.
  if (const auto load = read_load_average()) check.load_1min = load->one_minute;
  const CpuPeaks peaks = measure_cpu_peak_check();
  check.cpu_fma_gflops = peaks.fma_gflops_all_threads;
  check.cpu_fma_sustained_gflops = peaks.fma_sustained_gflops_all_threads;
  check.cpu_bf16_dot_gflops = peaks.bf16_dot_gflops_all_threads;
  return check;
}

void rate_against_peaks(CaseRecord& record, const PeakChecks& checks) {
  if (record.device != Device::cpu) return;
  const double best = checks.best(record.peak_name);
  if (best <= 0) return;
  record.peak_gflops = best;
  record.peak_checks_reason = checks.doubts(record.peak_name);
}

void write_peak_checks(nlohmann::ordered_json& manifest, const PeakChecks& checks) {
  manifest["peak_checks"] = checks.to_json();
  if (!manifest.contains("peaks") || !manifest["peaks"].is_object()) return;
  auto& peaks = manifest["peaks"];
  for (const char* name : {fma_name, bf16_name}) {
    if (checks.best(name) > 0) peaks[name] = checks.best(name);
  }
  // What flags the run's fp32 records (bf16 records add their own peak's disagreement).
  peaks["disturbed_reason"] = checks.doubts(fma_name);
}

}  // namespace attnbench
