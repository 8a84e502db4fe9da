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
#include "harness/runner/folder_writer.h"
#include "harness/runner/peak_check_schedule.h"
#include "harness/runner/resumed_cases.h"
#include "harness/runner/terminal_reporter.h"
#include "harness/variant/registry.h"

namespace attnbench {

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
  if (std::string shortfall =
          memory_shortfall(needed, memory_available_now(),
                           static_cast<double>(variant.reserved_address_space(c.shape)));
      !shortfall.empty())
    return shortfall;
  if (info.device == Device::cuda) {
    const GpuInfo gpu = query_gpu();
    const double device_needed = workspace + tensor_bytes(c.shape);
    if (gpu.memory_bytes > 0 && device_needed > 0.9 * static_cast<double>(gpu.memory_bytes)) {
      return fmt::format("needs {} of GPU memory, the GPU has {}", memory_text(device_needed),
                         memory_text(static_cast<double>(gpu.memory_bytes)));
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
    prepared.inputs =
        shared_inputs != nullptr
            ? *shared_inputs
            : make_inputs(c.shape, distribution,
                          case_input_seed(config_.measure.seed, config_.measure.interleave, c));
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
    found->second->release_tensors();
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
      inputs =
          make_inputs(shape, configured_distribution(),
                      case_input_seed(config_.measure.seed, config_.measure.interleave, first));
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

namespace {

// The dtypes of the CPU cases, in order of appearance: the roofs the terminal names.
std::vector<std::string> cpu_dtypes_of(const std::vector<Case>& cases) {
  std::vector<std::string> dtypes;
  for (const Case& c : cases) {
    if (Registry::instance().find(c.variant)->info.device != Device::cpu) continue;
    const std::string dtype = to_string(c.shape.dtype);
    if (std::find(dtypes.begin(), dtypes.end(), dtype) == dtypes.end()) dtypes.push_back(dtype);
  }
  return dtypes;
}

// How many of the session's records the final checks flag as disturbed.
int64_t disturbed_count(const std::vector<nlohmann::ordered_json>& session,
                        const PeakChecks& checks) {
  int64_t disturbed = 0;
  for (const nlohmann::ordered_json& stored : session)
    disturbed += rate_record(stored, checks)["disturbed"] == true ? 1 : 0;
  return disturbed;
}

}  // namespace

SweepOutcome SweepRunner::run(const std::vector<Case>& cases, RunFolder& folder) {
  FolderWriter writer(folder);
  TerminalReporter terminal(static_cast<int64_t>(cases.size()));
  return run(cases, folder, {&writer, &terminal});
}

SweepOutcome SweepRunner::run(const std::vector<Case>& cases, RunFolder& folder,
                              const std::vector<SweepReporter*>& reporters) {
  ResumedCases resumed = resume_in(folder, cases);
  for (const auto& [variant, seen] : resumed.last_finished) last_finished_[variant] = seen;
  SweepOutcome outcome;
  outcome.already_done = resumed.already_done;
  outcome.failed_earlier = resumed.failed_earlier;
  PeakCheckSchedule peak_checks(config_.measure, peaks_, folder);

  const RunStarted started{static_cast<int64_t>(cases.size()), resumed.already_done,
                           cpu_dtypes_of(resumed.to_run), &folder.peak_checks()};
  for (SweepReporter* reporter : reporters) reporter->run_started(started);
  std::vector<nlohmann::ordered_json> session;  // this session's records, as stored
  for (const std::vector<Case>& group : timing_groups(resumed.to_run, config_.measure.interleave)) {
    peak_checks.before_group(group.front().variant);
    for (const CaseRecord& record :
         run_group_and_tally(group, true, configured_distribution(), outcome)) {
      session.push_back(to_json(record));
      const CaseFinished finished{&record, &session.back(), &folder.peak_checks()};
      for (SweepReporter* reporter : reporters) reporter->case_finished(finished);
    }
    if (outcome.device_lost) break;
  }

  // The end check: one taken while something else ran reads low and must not stand as the peak,
  // and a disagreement between the checks flags the records.
  RunEnded ended;
  ended.session_records = static_cast<int64_t>(session.size());
  ended.peaks_skipped = peaks_.skipped;
  const PeakChecks before_end = folder.peak_checks();
  if (!session.empty() && !peaks_.skipped) {
    peak_checks.check("end");
    outcome.disturbed = disturbed_count(session, folder.peak_checks());
    ended.before_end = &before_end;
    ended.checks = &folder.peak_checks();
    ended.disturbed = outcome.disturbed;
  }
  for (SweepReporter* reporter : reporters) reporter->run_ended(ended);
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
