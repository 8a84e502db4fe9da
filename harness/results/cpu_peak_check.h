// A peak check made from one measurement of the CPU's peaks: the run's start check (taken with
// the manifest) and every later one (measure_peak_check) read the same numbers from CpuPeaks.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "harness/measure/cpu_peak.h"
#include "harness/measure/load_average.h"
#include "harness/results/peak_checks.h"

namespace attnbench {

// `load` is read before the peaks were measured: the measurement keeps every core busy.
inline PeakCheck cpu_peak_check(const std::string& when, const std::string& date,
                                const CpuPeaks& peaks, const std::optional<LoadAverage>& load,
                                const nlohmann::ordered_json& sizing) {
  PeakCheck check;
  check.when = when;
  check.date = date;
  check.cpu_fma_gflops = peaks.fma_gflops_all_threads;
  check.cpu_fma_sustained_gflops = peaks.fma_sustained_gflops_all_threads;
  check.cpu_bf16_dot_gflops = peaks.bf16_dot_gflops_all_threads;
  check.cpu_amx_bf16_gflops = peaks.amx_bf16_gflops_all_threads;
  check.cpu_triad_gbps = peaks.triad_gbps_all_threads;
  check.cpu_read_gbps = peaks.read_gbps_all_threads;
  if (load) check.load_1min = load->one_minute;
  check.sizing = sizing;
  return check;
}

}  // namespace attnbench
