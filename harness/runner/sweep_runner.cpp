#include "harness/runner/sweep_runner.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <new>

#include "harness/measure/checked_run.h"
#include "harness/measure/gpu.h"
#include "harness/measure/inputs.h"
#include "harness/measure/machine.h"
#include "harness/measure/timing.h"
#include "harness/results/terminal_report.h"
#include "harness/variant/registry.h"

namespace attnbench {

namespace {

// The tensors of one problem: Q, K, V and O, at the dtype's size.
double tensor_bytes(const Shape& s) {
  return static_cast<double>(s.q_elements() + s.k_elements() + s.v_elements() + s.o_elements()) *
         static_cast<double>(element_bytes(s.dtype));
}

// Host memory the harness holds for a case beside the variant's workspace: the fp32 inputs the
// oracle reads, their packed copies, the output buffer and its fp32 copy.
double host_harness_bytes(const Shape& s) {
  const double fp32_tensors =
      static_cast<double>(s.q_elements() + s.k_elements() + s.v_elements() + s.o_elements()) *
      sizeof(float);
  return fp32_tensors + tensor_bytes(s);
}

// Seeds differ per case but are fixed by the config, so a rerun times the same inputs.
uint64_t case_seed(const SweepConfig& config, const Case& c) {
  return static_cast<uint64_t>(config.measure.seed) * 1000003u + static_cast<uint64_t>(c.index);
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
  const double needed = workspace + host_harness_bytes(c.shape);
  const double cap = config_.measure.memory_cap_gb * 1024 * 1024 * 1024;
  if (needed > cap) {
    return fmt::format("needs {} (workspace {}), over memory_cap_gb {}", format_bytes(needed),
                       format_bytes(workspace), config_.measure.memory_cap_gb);
  }
  const double available = available_memory_bytes();
  if (available > 0 && needed > 0.9 * available) {
    return fmt::format("needs {}, but only {} of memory is available", format_bytes(needed),
                       format_bytes(available));
  }
  if (info.device == Device::cuda) {
    const GpuInfo gpu = query_gpu();
    const double device_needed = workspace + tensor_bytes(c.shape);
    if (gpu.memory_bytes > 0 && device_needed > 0.9 * static_cast<double>(gpu.memory_bytes)) {
      return fmt::format("needs {} of GPU memory, the GPU has {}", format_bytes(device_needed),
                         format_bytes(static_cast<double>(gpu.memory_bytes)));
    }
  }

  const auto seen = last_ok_.find(c.variant);
  if (timed && seen != last_ok_.end()) {
    // The n^2 model: time grows with the FLOP count, which is proportional to the query-key pairs.
    const double per_run =
        seen->second.seconds_per_run * count_work(c.shape).flops / seen->second.flops;
    const double timed_runs =
        config_.measure.repetitions * std::max(1.0, config_.measure.min_time_s / per_run);
    const double predicted =
        per_run * (static_cast<double>(config_.measure.warmup) + 2 + timed_runs);
    if (predicted > config_.measure.case_budget_s) {
      return fmt::format(
          "predicted {} > case_budget_s {} ({} per run, scaled from the previous case by FLOPs)",
          format_duration(predicted), config_.measure.case_budget_s, format_duration(per_run));
    }
  }
  return {};
}

CaseRecord SweepRunner::run_case(const Case& c, bool timed) {
  const RegisteredVariant* registered = Registry::instance().find(c.variant);
  std::unique_ptr<Variant> variant = registered->make();
  const VariantInfo info = registered->info;

  CaseRecord record;
  record.the_case = c;
  record.device = info.device;
  record.precision = info.capabilities.precision;
  record.work = count_work(c.shape);
  record.distribution = config_.measure.distribution;
  record.threads = info.device == Device::cpu ? omp_get_max_threads() : 0;
  const PeakChoice peak = peak_for(peaks_, info.device, c.shape.dtype, info.capabilities.precision);
  record.peak_gflops = peak.gflops;
  record.peak_name = peak.name;

  if (std::string reason = skip_reason(c, *variant, timed); !reason.empty()) {
    record.status = CaseStatus::skipped;
    record.reason = reason;
    return record;
  }

  Executor& executor = executor_for(info.device);
  executor.workspace().release_all();
  executor.workspace().reset_peak();
  const float scale = default_scale(c.shape);
  const auto distribution = *parse_distribution(config_.measure.distribution);
  try {
    variant->prepare(c.shape, executor.workspace());
    record.workspace_bytes = executor.workspace().peak_bytes();
    record.isa = variant->code_path();

    // A timed case is checked on the inputs it is timed on; `check` tries every distribution.
    const std::vector<Distribution> distributions =
        timed ? std::vector<Distribution>{distribution} : all_distributions();
    HostTensors inputs;
    for (Distribution checked : distributions) {
      inputs = make_inputs(c.shape, checked, case_seed(config_, c));
      record.oracle = run_checked(*variant, executor, inputs, scale, false, config_.oracle);
      if (!record.oracle->passed) {
        record.status = CaseStatus::failed;
        record.reason =
            fmt::format("oracle ({} inputs): {}", to_string(checked), record.oracle->failure);
        executor.workspace().release_all();
        return record;
      }
    }
    if (timed) {
      executor.load(inputs, false);
      TimingOptions options;
      options.warmup_runs = config_.measure.warmup;
      options.warmup_budget_s = config_.measure.case_budget_s;
      options.repetitions = config_.measure.repetitions;
      options.min_time_s = config_.measure.min_time_s;
      options.cold = config_.measure.cold;
      record.timing = time_case(c.id, *variant, executor, executor.problem(scale), options);
      // Checked again after timing: catches races and state left behind by earlier runs.
      record.oracle_after = run_checked(*variant, executor, inputs, scale, false, config_.oracle);
      if (!record.oracle_after->passed) {
        record.status = CaseStatus::failed;
        record.reason = "oracle after timing: " + record.oracle_after->failure;
      }
    }
  } catch (const DeviceLostError&) {
    executor.workspace().release_all();
    throw;
  } catch (const std::bad_alloc&) {
    record.status = CaseStatus::failed;
    record.reason = "out of memory";
  } catch (const std::exception& error) {
    record.status = CaseStatus::failed;
    record.reason = error.what();
  }
  executor.workspace().release_all();
  if (record.status == CaseStatus::ok && record.timing) {
    last_ok_[c.variant] = {record.work.flops, record.timing->median_ms / 1e3};
  }
  return record;
}

CaseRecord SweepRunner::run_and_count(const Case& c, bool timed, SweepOutcome& outcome) {
  CaseRecord record;
  try {
    record = run_case(c, timed);
  } catch (const DeviceLostError& lost) {
    // The context is gone: this case fails and the sweep stops, keeping what it finished.
    record.the_case = c;
    record.device = Device::cuda;
    record.work = count_work(c.shape);
    record.status = CaseStatus::failed;
    record.reason = fmt::format("device lost: {}", lost.what());
    outcome.device_lost = true;
  }
  switch (record.status) {
    case CaseStatus::ok: ++outcome.ok; break;
    case CaseStatus::skipped: ++outcome.skipped; break;
    case CaseStatus::failed: ++outcome.failed; break;
  }
  return record;
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
      last_ok_[record.at("variant").get<std::string>()] = {
          record.at("flops").get<double>(), record.at("time_ms_median").get<double>() / 1e3};
    }
  }
  TerminalReport report(static_cast<int64_t>(cases.size()));
  report.header();
  int64_t done = 0;
  for (const Case& c : cases) {
    ++done;
    if (finished.count(c.id) != 0) {
      ++outcome.already_done;
      outcome.failed_earlier += static_cast<int64_t>(failed_before.count(c.id));
      continue;
    }
    const CaseRecord record = run_and_count(c, true, outcome);
    folder.append(to_json(record));
    folder.write_summary_csv();
    report.row(record);
    report.progress(done);
    if (outcome.device_lost) break;
  }
  report.finish();
  folder.write_summary_csv();
  return outcome;
}

SweepOutcome SweepRunner::check(const std::vector<Case>& cases, std::vector<CaseRecord>* records) {
  SweepOutcome outcome;
  TerminalReport report(static_cast<int64_t>(cases.size()));
  int64_t done = 0;
  for (const Case& c : cases) {
    CaseRecord record = run_and_count(c, false, outcome);
    if (records != nullptr) {
      records->push_back(std::move(record));
    } else {
      report.check_row(record);
    }
    report.progress(++done);
    if (outcome.device_lost) break;
  }
  report.finish();
  return outcome;
}

}  // namespace attnbench
