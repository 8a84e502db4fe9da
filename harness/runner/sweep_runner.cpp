#include "harness/runner/sweep_runner.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <new>

#include "harness/measure/checked_run.h"
#include "harness/measure/gpu.h"
#include "harness/measure/inputs.h"
#include "harness/measure/interleaved_timing.h"
#include "harness/measure/machine.h"
#include "harness/measure/memory_limit.h"
#include "harness/measure/oracle.h"
#include "harness/measure/timing.h"
#include "harness/results/terminal_report.h"
#include "harness/runner/case_budget.h"
#include "harness/variant/registry.h"

namespace attnbench {

namespace {

uint64_t case_seed(const SweepConfig& config, const Case& c) {
  return input_seed(config.measure.seed, c.index);
}

}  // namespace

SweepRunner::SweepRunner(const SweepConfig& config, const MeasuredPeaks& peaks)
    : config_(config), peaks_(peaks) {}

Executor& SweepRunner::executor_for(Device device) {
  auto& executor = executors_[device];
  if (!executor) executor = make_executor(device);
  return *executor;
}

std::string SweepRunner::skip_reason(const Case& c, const Variant& variant, bool timed) const {
  const VariantInfo info = variant.info();
  std::string unavailable;
  if (!device_available(info.device, &unavailable)) return unavailable;
  if (std::string reason = unsupported_reason(info, c.shape, false); !reason.empty()) return reason;

  const double workspace = static_cast<double>(variant.workspace_bytes(c.shape));
  if (std::string reason = over_memory_cap(config_.measure, c.shape, workspace); !reason.empty())
    return reason;
  const double needed = workspace + host_harness_bytes(c.shape);
  // The least of the host's, the cgroup's and the rlimits' headroom, read now: what an
  // interleaved group already holds is in use by then.
  if (std::string shortfall = memory_shortfall(needed, memory_available_now()); !shortfall.empty())
    return shortfall;
  if (info.device == Device::cuda) {
    const GpuInfo gpu = query_gpu();
    const double device_needed = workspace + tensor_bytes(c.shape);
    if (gpu.memory_bytes > 0 && device_needed > 0.9 * static_cast<double>(gpu.memory_bytes)) {
      return fmt::format("needs {} of GPU memory, the GPU has {}", format_bytes(device_needed),
                         format_bytes(static_cast<double>(gpu.memory_bytes)));
    }
  }

  const auto seen = last_finished_.find(c.variant);
  if (timed && seen != last_finished_.end())
    return over_time_budget(config_.timing, seen->second, count_work(c.shape).flops);
  return {};
}

namespace {

// Runs `step`, turning what it throws into a failed record; a lost device propagates, the
// sweep must stop.
template <class Step>
void failing_record_on_error(CaseRecord& record, Step step) {
  try {
    step();
  } catch (const DeviceLostError&) {
    throw;
  } catch (const std::bad_alloc&) {
    record.status = CaseStatus::failed;
    record.reason = "out of memory";
  } catch (const std::exception& error) {
    record.status = CaseStatus::failed;
    record.reason = error.what();
  }
}

}  // namespace

SweepRunner::PreparedCase SweepRunner::prepare_case(const Case& c, bool timed,
                                                    Distribution distribution,
                                                    const HostTensors* shared_inputs,
                                                    const std::string& skip) {
  const RegisteredVariant* registered = Registry::instance().find(c.variant);
  PreparedCase prepared;
  prepared.variant = registered->make();
  const VariantInfo info = registered->info;

  CaseRecord& record = prepared.record;
  record.sweep_case = c;
  record.device = info.device;
  record.precision = info.capabilities.precision;
  record.work = count_work(c.shape);
  record.distribution = to_string(distribution);
  record.threads = info.device == Device::cpu ? omp_get_max_threads() : 0;
  // The peak it is rated against, by name: the rating itself is derived when the folder is read.
  record.peak_name = peak_for(peaks_, info.device, c.shape.dtype, info.capabilities.precision).name;

  std::string reason = skip_reason(c, *prepared.variant, timed);
  if (reason.empty()) reason = skip;
  if (!reason.empty()) {
    record.status = CaseStatus::skipped;
    record.reason = reason;
    return prepared;
  }

  Executor& executor = executor_for(info.device);
  const float scale = default_scale(c.shape);
  failing_record_on_error(record, [&] {
    // Other variants of an interleaved group may hold memory here: count only this one's.
    const std::size_t held = executor.workspace().current_bytes();
    executor.workspace().reset_peak();
    prepared.variant->prepare(c.shape, executor.workspace());
    record.workspace_bytes = executor.workspace().peak_bytes() - held;
    record.saved_for_backward_bytes =
        needs_backward(c.shape.pass) ? prepared.variant->saved_for_backward_bytes(c.shape) : 0;
    record.code_path = prepared.variant->code_path();

    // A timed case is checked on the inputs it is timed on.
    prepared.inputs = shared_inputs != nullptr
                          ? *shared_inputs
                          : make_inputs(c.shape, distribution, case_seed(config_, c));
    // A quantized cache's own error, beside the speed: the same for every variant of the case.
    // The unquantized values are needed for nothing else: released, since a 128K-key cache's are
    // a GiB.
    if (is_quantized(c.shape.kv_dtype)) {
      record.kv_quant_rel_l2_err = kv_quant_error(prepared.inputs, scale, config_.oracle);
      std::vector<float>().swap(prepared.inputs.quantized.k_exact);
      std::vector<float>().swap(prepared.inputs.quantized.v_exact);
    }
    record.oracle =
        run_checked(*prepared.variant, executor, prepared.inputs, scale, false, config_.oracle);
    if (!record.oracle->passed) {
      record.status = CaseStatus::failed;
      record.reason =
          fmt::format("oracle ({} inputs): {}", to_string(distribution), record.oracle->failure);
    }
  });
  prepared.ready = record.status == CaseStatus::ok;
  return prepared;
}

void SweepRunner::recheck_after_timing(PreparedCase& prepared, Executor& executor) {
  // Checked again after timing: catches races and state left behind by earlier runs.
  CaseRecord& record = prepared.record;
  record.oracle_after = run_checked(*prepared.variant, executor, prepared.inputs,
                                    default_scale(record.sweep_case.shape), false, config_.oracle);
  if (!record.oracle_after->passed) {
    record.status = CaseStatus::failed;
    record.reason = "oracle after timing: " + record.oracle_after->failure;
  }
}

void SweepRunner::release_workspace(Device device) {
  // Only an executor that exists: a device that is unavailable never had one.
  if (const auto found = executors_.find(device); found != executors_.end()) {
    found->second->workspace().release_all();
    found->second->workspace().reset_peak();
  }
}

void SweepRunner::keep_time_for_predictions(const CaseRecord& record) {
  if (record.status == CaseStatus::ok && record.timing) {
    last_finished_[record.sweep_case.variant] = {record.work.flops, record.timing->median_ms / 1e3};
  }
}

Distribution SweepRunner::configured_distribution() const {
  return *parse_distribution(config_.measure.distribution);  // the config parser checked it
}

CaseRecord SweepRunner::run_case(const Case& c, bool timed, Distribution distribution) {
  const Device device = Registry::instance().find(c.variant)->info.device;
  release_workspace(device);
  PreparedCase prepared = prepare_case(c, timed, distribution, nullptr, {});
  if (prepared.ready && timed) {
    Executor& executor = executor_for(device);
    failing_record_on_error(prepared.record, [&] {
      executor.load(prepared.inputs, false);
      const Problem problem = executor.problem(default_scale(c.shape));
      prepared.record.timing =
          time_case(c.id, *prepared.variant, executor, problem, config_.timing);
      recheck_after_timing(prepared, executor);
    });
  }
  release_workspace(device);
  keep_time_for_predictions(prepared.record);
  return prepared.record;
}

std::vector<CaseRecord> SweepRunner::run_interleaved(const std::vector<Case>& group) {
  const Case& first = group.front();
  const Device device = Registry::instance().find(first.variant)->info.device;
  release_workspace(device);
  // One set of inputs for the whole group, so every variant times the same problem. They are
  // made before any case of the group is checked for memory, so they are checked first: a
  // group whose inputs cannot fit is skipped, as a case alone would be.
  const Shape& shape = first.shape;
  const double input_bytes =
      static_cast<double>(shape.q_elements() + shape.k_elements() + shape.v_elements()) *
      sizeof(float);
  std::string skip = memory_shortfall(input_bytes, memory_available_now());
  HostTensors inputs;
  if (skip.empty()) {
    try {
      inputs = make_inputs(shape, configured_distribution(), case_seed(config_, first));
    } catch (const std::bad_alloc&) {
      skip = fmt::format("out of memory making them ({})", memory_text(input_bytes));
    }
  }
  if (!skip.empty()) skip = "interleaved group's inputs: " + skip;
  std::vector<PreparedCase> prepared;
  std::vector<std::size_t> ready;
  for (const Case& c : group) {
    prepared.push_back(prepare_case(c, true, configured_distribution(), &inputs, skip));
    if (prepared.back().ready) ready.push_back(prepared.size() - 1);
  }
  if (!ready.empty()) {
    Executor& executor = executor_for(device);
    const TimingOptions& options = config_.timing;
    // A failure of one variant fails the whole group: its rounds are no longer paired.
    CaseRecord failure;
    failing_record_on_error(failure, [&] {
      executor.load(inputs, false);
      const Problem problem = executor.problem(default_scale(first.shape));
      for (std::size_t index : ready)
        for (int64_t i = 0; i < options.warmup_runs; ++i)
          executor.timed_run_ms(*prepared[index].variant, problem);
      const std::vector<TimingStats> stats =
          time_interleaved(ready.size(), options, [&](std::size_t i) {
            PreparedCase& p = prepared[ready[i]];
            return time_batch(p.record.sweep_case.id, *p.variant, executor, problem, options, 1);
          });
      for (std::size_t i = 0; i < ready.size(); ++i) prepared[ready[i]].record.timing = stats[i];
    });
    for (std::size_t index : ready) {
      CaseRecord& record = prepared[index].record;
      if (failure.status == CaseStatus::failed) {
        record.status = CaseStatus::failed;
        record.reason = "interleaved timing: " + failure.reason;
        record.timing.reset();
        continue;
      }
      failing_record_on_error(record, [&] { recheck_after_timing(prepared[index], executor); });
    }
  }
  release_workspace(device);
  std::vector<CaseRecord> records;
  for (PreparedCase& p : prepared) {
    keep_time_for_predictions(p.record);
    records.push_back(std::move(p.record));
  }
  return records;
}

std::vector<CaseRecord> SweepRunner::run_group_and_tally(const std::vector<Case>& group, bool timed,
                                                         Distribution distribution,
                                                         SweepOutcome& outcome) {
  std::vector<CaseRecord> records;
  try {
    if (timed && config_.measure.interleave) {
      records = run_interleaved(group);
    } else {
      for (const Case& c : group) records.push_back(run_case(c, timed, distribution));
    }
  } catch (const DeviceLostError& lost) {
    // The context is gone: these cases fail and the sweep stops, keeping what it finished.
    records.clear();
    for (const Case& c : group) {
      CaseRecord record;
      record.sweep_case = c;
      record.device = Device::cuda;
      record.work = count_work(c.shape);
      record.status = CaseStatus::failed;
      record.reason = fmt::format("device lost: {}", lost.what());
      records.push_back(std::move(record));
    }
    outcome.device_lost = true;
  }
  for (const CaseRecord& record : records) {
    switch (record.status) {
      case CaseStatus::ok: ++outcome.ok; break;
      case CaseStatus::skipped: ++outcome.skipped; break;
      case CaseStatus::failed: ++outcome.failed; break;
    }
  }
  return records;
}

std::vector<std::vector<Case>> timing_groups(const std::vector<Case>& cases, bool interleave) {
  std::vector<std::vector<Case>> groups;
  if (!interleave) {
    for (const Case& c : cases) groups.push_back({c});
    return groups;
  }
  std::map<std::string, std::size_t> group_of;  // device and shape -> index in groups
  for (const Case& c : cases) {
    const Device device = Registry::instance().find(c.variant)->info.device;
    const std::string key = std::string(to_string(device)) + "|" + case_id("", c.shape);
    const auto [found, inserted] = group_of.emplace(key, groups.size());
    if (inserted) groups.emplace_back();
    groups[found->second].push_back(c);
  }
  return groups;
}

SweepOutcome SweepRunner::run(const std::vector<Case>& cases, RunFolder& folder) {
  SweepOutcome outcome;
  const std::set<std::string> finished = folder.finished_case_ids();
  std::set<std::string> failed_before;
  for (const auto& record : folder.records()) {
    if (record.at("status") == "failed")
      failed_before.insert(record.at("case_id").get<std::string>());
  }
  // A resumed run predicts from the cases it already has.
  for (const auto& record : folder.records()) {
    // The records were checked against record_schema.h when the folder was read.
    if (record.at("status") == "ok") {
      last_finished_[record.at("variant").get<std::string>()] = {
          record.at("flops").get<double>(), record.at("time_ms_median").get<double>() / 1e3};
    }
  }
  std::vector<Case> to_run;
  for (const Case& c : cases) {
    if (finished.count(c.id) != 0) {
      ++outcome.already_done;
      outcome.failed_earlier += static_cast<int64_t>(failed_before.count(c.id));
    } else {
      to_run.push_back(c);
    }
  }

  // The peaks chosen between (the bf16 peak where it beats the FMA's) are the best so far.
  auto update_peaks = [&] {
    peaks_.cpu_gflops = std::max(peaks_.cpu_gflops, folder.peak_checks().best("cpu_fma_gflops"));
    peaks_.cpu_bf16_gflops =
        std::max(peaks_.cpu_bf16_gflops, folder.peak_checks().best("cpu_bf16_dot_gflops"));
    peaks_.cpu_amx_bf16_gflops =
        std::max(peaks_.cpu_amx_bf16_gflops, folder.peak_checks().best("cpu_amx_bf16_gflops"));
  };
  auto add_check = [&](const std::string& when) {
    if (peaks_.skipped) return;
    folder.append_peak_check(measure_peak_check(when, peaks_.cpu_bandwidth));
    nlohmann::ordered_json manifest = folder.manifest();
    write_peaks_summary(manifest, folder.peak_checks());
    folder.write_manifest(manifest);
    update_peaks();
  };
  update_peaks();
  auto last_check = std::chrono::steady_clock::now();

  TerminalReport report(static_cast<int64_t>(cases.size()));
  std::vector<std::string> cpu_dtypes;  // the dtypes of the CPU cases, in order of appearance
  for (const Case& c : to_run) {
    if (Registry::instance().find(c.variant)->info.device != Device::cpu) continue;
    const std::string dtype = to_string(c.shape.dtype);
    if (std::find(cpu_dtypes.begin(), cpu_dtypes.end(), dtype) == cpu_dtypes.end())
      cpu_dtypes.push_back(dtype);
  }
  report.roofs(cpu_dtypes, folder.peak_checks(), false);
  report.header();
  // Each session record's row as shown: % of peak (-1 when none) against the checks then.
  std::vector<TerminalReport::Rerated> shown;
  int64_t done = outcome.already_done;
  std::vector<nlohmann::ordered_json> session;  // this session's records, as stored
  std::string previous_variant;
  for (const std::vector<Case>& group : timing_groups(to_run, config_.measure.interleave)) {
    // Between variants (or, interleaved, between shapes) of a long run: a peak that drifted
    // since the start shows here, not only at the end.
    const bool new_variant =
        config_.measure.interleave || group.front().variant != previous_variant;
    const double since_check =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - last_check).count();
    if (!previous_variant.empty() && new_variant &&
        since_check >= config_.measure.peak_check_interval_s) {
      add_check("between variants");
      last_check = std::chrono::steady_clock::now();
    }
    previous_variant = group.front().variant;

    for (const CaseRecord& record :
         run_group_and_tally(group, true, configured_distribution(), outcome)) {
      nlohmann::ordered_json stored = to_json(record);
      folder.append(stored);
      // Rated as every reader rates it, against the folder's checks as they stand.
      const nlohmann::ordered_json rated = rate_record(stored, folder.peak_checks());
      report.row(record, rated);
      shown.push_back(
          {record.sweep_case.variant, describe(record.sweep_case.shape),
           rated["percent_of_peak"].is_number() ? rated["percent_of_peak"].get<double>() : -1.0});
      report.progress(++done);
      session.push_back(std::move(stored));
    }
    if (outcome.device_lost) break;
  }
  report.finish();

  // The end check: one taken while something else ran reads low and must not stand as the peak,
  // and a disagreement between the checks flags the records.
  if (!session.empty() && !peaks_.skipped) {
    const PeakChecks before_end = folder.peak_checks();
    add_check("end");
    std::vector<TerminalReport::Rerated> rerated;
    for (std::size_t i = 0; i < session.size(); ++i) {
      const nlohmann::ordered_json rated = rate_record(session[i], folder.peak_checks());
      if (rated["disturbed"] == true) ++outcome.disturbed;
      // A change under 0.05 points would print as the same number.
      if (rated["percent_of_peak"].is_number() && shown[i].shown >= 0 &&
          std::abs(rated["percent_of_peak"].get<double>() - shown[i].shown) >= 0.05) {
        rerated.push_back(shown[i]);
        rerated.back().final = rated["percent_of_peak"].get<double>();
      }
    }
    report.peak_summary(before_end, folder.peak_checks(), outcome.disturbed,
                        static_cast<int64_t>(session.size()));
    report.rerated(rerated);
    report.roofs(cpu_dtypes, folder.peak_checks(), true);
  }
  if (!session.empty() && peaks_.skipped)
    fmt::print("no peak checks (measure.peaks = skip): no record is rated against a peak\n");
  folder.write_summary_csv();
  return outcome;
}

SweepOutcome SweepRunner::check(const std::vector<Case>& cases, std::vector<CaseRecord>* records) {
  SweepOutcome outcome;
  TerminalReport report(static_cast<int64_t>(cases.size()));
  int64_t done = 0;
  for (const Case& c : cases) {
    SweepOutcome of_case;  // its checks: the case passes when every distribution's does
    for (Distribution distribution : all_distributions()) {
      CaseRecord record = std::move(run_group_and_tally({c}, false, distribution, of_case).front());
      // A skip's reason is the case's (memory, a capability), the same on every distribution.
      const bool skipped = record.status == CaseStatus::skipped;
      if (records != nullptr) {
        records->push_back(std::move(record));
      } else {
        report.check_row(record);
      }
      if (skipped || of_case.device_lost) break;
    }
    if (of_case.failed > 0) {
      ++outcome.failed;
    } else if (of_case.skipped > 0) {
      ++outcome.skipped;
    } else {
      ++outcome.ok;
    }
    outcome.device_lost = of_case.device_lost;
    report.progress(++done);
    if (outcome.device_lost) break;
  }
  report.finish();
  return outcome;
}

}  // namespace attnbench
