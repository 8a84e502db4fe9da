#include "harness/results/manifest.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <limits>
#include <optional>

#include "harness/core/diagnostic.h"
#include "harness/core/record.h"
#include "harness/core/work_count.h"
#include "harness/measure/cpu_peak.h"
#include "harness/measure/gpu.h"
#include "harness/measure/load_average.h"
#include "harness/measure/machine.h"
#include "harness/measure/slurm_env.h"
#include "harness/measure/start_peaks.h"
#include "harness/results/cpu_peak_check.h"
#include "harness/results/peak_checks.h"

namespace attnbench {

namespace {

// Measures the run's start check (none with measure.peaks = skip) and notes in `peaks` what its
// records are rated against.
StartPeaks measure_run_peaks(const SweepConfig& config, double lowest_cpu_intensity,
                             MeasuredPeaks& peaks) {
  peaks.skipped = config.measure.peaks == "skip";
  const StartPeaks start_peaks =
      peaks.skipped ? StartPeaks{}
                    : measure_start_peaks([&] { return measure_cpu_peaks(lowest_cpu_intensity); });
  const CpuPeaks& cpu = start_peaks.peaks;
  peaks.cpu_bandwidth = !peaks.skipped && cpu.bandwidth.measure;
  peaks.cpu_gflops = cpu.fma_gflops_all_threads;
  peaks.cpu_bf16_gflops = cpu.bf16_dot_gflops_all_threads;
  peaks.cpu_amx_bf16_gflops = cpu.amx_bf16_gflops_all_threads;
  return start_peaks;
}

// Printable ASCII as it is, anything else as '?': JSON must be valid UTF-8.
std::string printable_ascii(std::string text) {
  for (char& c : text)
    if (c < 0x20 || c > 0x7E) c = '?';
  return text;
}

nlohmann::ordered_json machine_json(const MachineInfo& machine) {
  return {{"description", describe(machine)},
          {"cpu_model", machine.cpu_model},
          {"cores", machine.affinity_cpus},
          {"logical_cpus", machine.logical_cpus},
          {"threads", machine.omp_threads},
          {"omp_schedule", machine.omp_schedule},
          {"omp_proc_bind", machine.omp_proc_bind},
          {"isa", machine.isa},
          {"cpu_features", machine.cpu_features},
          {"cpu_features_detected", machine.cpu_features_detected},
          {"memory_gb", machine.memory_gb},
          {"hostname", machine.hostname}};
}

// What ran, from what, where: the manifest up to its peaks.
nlohmann::ordered_json describe_run(const SweepConfig& config, const std::string& command_line,
                                    const std::string& shard, const MachineInfo& machine) {
  nlohmann::ordered_json m;
  m["name"] = config.name;
  m["schema_version"] = kSchemaVersion;
  m["date"] = fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::chrono::system_clock::now()));
  m["command"] = command_line;
  m["git_commit"] = git_commit();
  m["shard"] = shard;
  m["config"] = config.as_json;
  m["config_text"] = config.source_text;
  m["config_overrides"] = config.overrides;
  m["environment"] = environment_json();
  m["build"] = build_info_json();
  m["node"] = node_name();
  m["slurm"] = slurm_job_json();
  m["machine"] = machine_json(machine);
  return m;
}

nlohmann::ordered_json cpu_peaks_json(const CpuPeaks& cpu) {
  nlohmann::ordered_json peaks = {
      {"cpu_fma_gflops", cpu.fma_gflops_all_threads},
      {"cpu_fma_gflops_one_thread", cpu.fma_gflops_one_thread},
      {"cpu_sgemm_gflops", cpu.sgemm_gflops},
      {"cpu_bf16_dot_gflops", cpu.bf16_dot_gflops_all_threads > 0
                                  ? nlohmann::ordered_json(cpu.bf16_dot_gflops_all_threads)
                                  : nlohmann::ordered_json(nullptr)},
      {"cpu_triad_gbps", cpu.triad_gbps_all_threads},
      {"cpu_read_gbps", cpu.read_gbps_all_threads},
      {"cpu_peak_threads", cpu.threads}};
  if (cpu.amx_bf16_gflops_all_threads > 0)
    peaks["cpu_amx_bf16_gflops"] = cpu.amx_bf16_gflops_all_threads;
  return peaks;
}

// How the start check was sized, and how many attempts it took to run alone.
nlohmann::ordered_json start_sizing_json(const StartPeaks& start_peaks) {
  nlohmann::ordered_json sizing = peak_sizing_json(start_peaks.peaks);
  sizing["start_attempts"] = start_peaks.attempts;
  sizing["start_clean"] = start_peaks.clean;
  if (!start_peaks.note.empty()) {
    sizing["start_note"] = start_peaks.note;
    // None clean is a warning; a retake that came out clean is in the manifest only (stdout
    // is a peer's channel for `append`'s records).
    if (!start_peaks.clean)
      print_diagnostic("attnbench: warning: start check: {}\n", start_peaks.note);
  }
  return sizing;
}

nlohmann::ordered_json gpu_json(const GpuInfo& gpu, const GpuPeaks& gpu_peaks) {
  return {{"name", gpu.name},
          {"sm_count", gpu.sm_count},
          {"compute_capability", gpu.compute_capability},
          {"memory_bytes", gpu.memory_bytes},
          {"l2_bytes", gpu.l2_bytes},
          {"driver_version", gpu.driver_version},
          {"runtime_version", gpu.runtime_version},
          {"sgemm_gflops", gpu_peaks.sgemm_gflops},
          {"tf32_gemm_gflops", gpu_peaks.tf32_gemm_gflops},
          {"bf16_gemm_gflops", gpu_peaks.bf16_gemm_gflops},
          {"fp16_gemm_gflops", gpu_peaks.fp16_gemm_gflops},
          {"copy_gbps", gpu_peaks.copy_gbps}};
}

// Measures the GPU's peaks into `peaks`, the start check and the manifest's "gpu" when the run
// has a CUDA variant and takes checks; else says in the manifest why it did not.
void add_gpu(nlohmann::ordered_json& m, bool with_gpu, MeasuredPeaks& peaks, PeakCheck& start) {
  const GpuInfo gpu = query_gpu();
  if (!gpu.available || !with_gpu || peaks.skipped) {
    m["gpu"] = nullptr;
    m["gpu_unavailable_reason"] = gpu.available && !peaks.skipped ? "no CUDA variant in this run"
                                  : gpu.available                 ? "measure.peaks = skip"
                                                                  : gpu.unavailable_reason;
    return;
  }
  const GpuPeaks gpu_peaks = measure_gpu_peaks();
  peaks.gpu_gflops = gpu_peaks.sgemm_gflops;
  peaks.gpu_tf32_gflops = gpu_peaks.tf32_gemm_gflops;
  peaks.gpu_bf16_gflops = gpu_peaks.bf16_gemm_gflops;
  peaks.gpu_fp16_gflops = gpu_peaks.fp16_gemm_gflops;
  m["gpu"] = gpu_json(gpu, gpu_peaks);
  start.gpu_gflops = {{"sgemm_gflops", gpu_peaks.sgemm_gflops},
                      {"tf32_gemm_gflops", gpu_peaks.tf32_gemm_gflops},
                      {"bf16_gemm_gflops", gpu_peaks.bf16_gemm_gflops},
                      {"fp16_gemm_gflops", gpu_peaks.fp16_gemm_gflops}};
  start.gpu_copy_gbps = gpu_peaks.copy_gbps;
}

}  // namespace

nlohmann::ordered_json environment_json() {
  nlohmann::ordered_json environment = nlohmann::ordered_json::object();
  for (const char* name : {"ATTNBENCH_FLASH_CPU_ISA", "ATTNBENCH_CPU_FEATURES", "OMP_NUM_THREADS",
                           "OMP_PROC_BIND", "OMP_PLACES", "OMP_SCHEDULE"}) {
    const char* value = std::getenv(name);
    environment[name] = value == nullptr ? nlohmann::ordered_json(nullptr)
                                         : nlohmann::ordered_json(printable_ascii(value));
  }
  return environment;
}

nlohmann::ordered_json make_manifest(const SweepConfig& config, const std::string& command_line,
                                     const std::string& shard, bool with_gpu, MeasuredPeaks& peaks,
                                     PeakCheck& start, double lowest_cpu_intensity) {
  const MachineInfo machine = query_machine();
  const std::optional<LoadAverage> load = read_load_average();  // before the peaks load the CPU
  const StartPeaks start_peaks = measure_run_peaks(config, lowest_cpu_intensity, peaks);
  nlohmann::ordered_json m = describe_run(config, command_line, shard, machine);
  start = PeakCheck{};
  if (peaks.skipped) {
    m["peaks"] = {{"skipped", peaks_skipped_text}};
  } else {
    m["peaks"] = cpu_peaks_json(start_peaks.peaks);
    m["peak_sizing"] = start_sizing_json(start_peaks);
    // The first of the run's peak checks; the run adds the others (between variants, at its end).
    start = cpu_peak_check("start", m["date"].get<std::string>(), start_peaks.peaks, load,
                           m["peak_sizing"]);
  }
  add_gpu(m, with_gpu, peaks, start);
  if (!peaks.skipped) {
    PeakChecks checks;
    checks.add(start);
    write_peaks_summary(m, checks);
  }
  return m;
}

SweepConfig config_from_manifest(const nlohmann::ordered_json& manifest, const std::string& where) {
  if (!manifest.contains("config_text") || !manifest["config_text"].is_string())
    throw ConfigError(fmt::format("{}: the manifest holds no config_text", where));
  std::vector<std::string> overrides;
  if (manifest.contains("config_overrides") && manifest["config_overrides"].is_array()) {
    for (const auto& assignment : manifest["config_overrides"]) {
      if (!assignment.is_string())
        throw ConfigError(
            fmt::format("{}: config_overrides holds a value that is not text", where));
      overrides.push_back(assignment.get<std::string>());
    }
  }
  return parse_config(manifest["config_text"].get<std::string>(), where, overrides);
}

MeasuredPeaks peaks_from_manifest(const nlohmann::ordered_json& manifest) {
  MeasuredPeaks peaks;
  // A key that is absent or null (an older manifest, a CPU without the instruction) reads 0.
  auto number = [](const nlohmann::ordered_json& object, const char* key) {
    return object.contains(key) && object[key].is_number() ? object[key].get<double>() : 0.0;
  };
  if (manifest.contains("peaks") && manifest["peaks"].is_object() &&
      manifest["peaks"].contains("skipped"))
    peaks.skipped = true;
  // Written before the bandwidth was decided per run: every check measured it.
  if (manifest.contains("peak_sizing") && manifest["peak_sizing"].is_object())
    peaks.cpu_bandwidth = manifest["peak_sizing"]
                              .value("triad", nlohmann::ordered_json::object())
                              .value("measured", false);
  if (manifest.contains("peaks") && manifest["peaks"].is_object()) {
    peaks.cpu_gflops = number(manifest["peaks"], "cpu_fma_gflops");
    peaks.cpu_bf16_gflops = number(manifest["peaks"], "cpu_bf16_dot_gflops");
    peaks.cpu_amx_bf16_gflops = number(manifest["peaks"], "cpu_amx_bf16_gflops");
  }
  if (manifest.contains("gpu") && manifest["gpu"].is_object()) {
    peaks.gpu_gflops = number(manifest["gpu"], "sgemm_gflops");
    peaks.gpu_tf32_gflops = number(manifest["gpu"], "tf32_gemm_gflops");
    peaks.gpu_bf16_gflops = number(manifest["gpu"], "bf16_gemm_gflops");
    peaks.gpu_fp16_gflops = number(manifest["gpu"], "fp16_gemm_gflops");
  }
  return peaks;
}

PeakChoice peak_for(const MeasuredPeaks& peaks, Device device, DType dtype, Precision precision) {
  if (device == Device::cpu) {
    // bf16 products with fp32 accumulation run either as vdpbf16ps or widened to fp32 on the
    // FMA units, whichever this core does faster (on the Intel Xeons measured here vdpbf16ps
    // runs at half the FMA's FLOP rate; on AMD Zen 4 at twice), or as TDPBF16PS on AMX tiles
    // where the CPU has them (about 10x the FMA's rate): the bf16 peak is the best of the three,
    // so a bf16 kernel that leaves AMX unused reads the small share of the machine it uses.
    if (dtype == DType::bf16 && peaks.cpu_amx_bf16_gflops > peaks.cpu_gflops &&
        peaks.cpu_amx_bf16_gflops > peaks.cpu_bf16_gflops)
      return {peaks.cpu_amx_bf16_gflops, "cpu_amx_bf16_gflops"};
    if (dtype == DType::bf16 && peaks.cpu_bf16_gflops > peaks.cpu_gflops)
      return {peaks.cpu_bf16_gflops, "cpu_bf16_dot_gflops"};
    return {peaks.cpu_gflops, "cpu_fma_gflops"};
  }
  switch (dtype) {
    case DType::bf16: return {peaks.gpu_bf16_gflops, "bf16_gemm_gflops"};
    case DType::fp16: return {peaks.gpu_fp16_gflops, "fp16_gemm_gflops"};
    case DType::fp32:
      if (precision == Precision::tf32) return {peaks.gpu_tf32_gflops, "tf32_gemm_gflops"};
      return {peaks.gpu_gflops, "sgemm_gflops"};
  }
  return {};
}

}  // namespace attnbench
