// The run manifest: everything needed to trust, reproduce and compare a run's numbers.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/core/case.h"
#include "harness/core/dtype.h"
#include "harness/plan/config.h"
#include "harness/results/peak_checks.h"

namespace attnbench {

struct MeasuredPeaks {
  double cpu_gflops = 0;       // the FMA peak on all threads: the "% of peak" of fp32 CPU records
  double cpu_bf16_gflops = 0;  // the vdpbf16ps peak; 0 without AVX512_BF16
  double gpu_gflops = 0;       // the cuBLAS SGEMM peak: the "% of peak" of fp32 CUDA records
  double gpu_tf32_gflops = 0;
  double gpu_bf16_gflops = 0;  // cuBLAS GEMM on tensor cores, fp32 accumulation
  double gpu_fp16_gflops = 0;
  // The TDPBF16PS (AMX tiles) peak; 0 without usable AMX.
  double cpu_amx_bf16_gflops = 0;
  // Whether the run's checks measure the CPU's triad bandwidth (decide_bandwidth, at its start).
  bool cpu_bandwidth = true;
  // measure.peaks = "skip": no check is taken, and no record is rated.
  bool skipped = false;
};

// The manifest's "peaks" of a run with measure.peaks = "skip" is {"skipped": this}.
inline constexpr const char* peaks_skipped_text =
    "measure.peaks = skip: no peak check was taken, and no record is rated";

// The peak a record's "% of peak" is read against, and its name in the manifest: the dtype's own
// peak (on a CPU, bf16's is the better of vdpbf16ps and widening to the FMA units; on a GPU, a
// tensor-core GEMM of the dtype), else the fp32 FMA peak that a variant widening narrow inputs to
// fp32 runs on.
struct PeakChoice {
  double gflops = 0;
  std::string name;  // e.g. "cpu_bf16_dot_gflops"; empty when unknown
};
PeakChoice peak_for(const MeasuredPeaks& peaks, Device device, DType dtype, Precision precision);

// Measures the peaks (about half a second on a CPU, the triad's quarter more where a CPU case has
// an arithmetic intensity below the ridge estimate (runner/cpu_intensity.h gives the sweep's
// lowest), see decide_bandwidth; the GPU only when `with_gpu`) and describes the machine, build and
// config; "peak_sizing" says how each check was sized. `start` is the run's first peak check, for
// its peaks.jsonl (the manifest's "peaks" only summarises the checks). With config.measure.peaks =
// "skip" nothing is measured: "peaks" reads {"skipped": peaks_skipped_text}, `peaks.skipped` is set
// and `start` stays empty.
nlohmann::ordered_json make_manifest(const SweepConfig& config, const std::string& command_line,
                                     const std::string& shard, bool with_gpu, MeasuredPeaks& peaks,
                                     PeakCheck& start, double lowest_cpu_intensity = 0);

// Settings read from the environment that change what runs (a forced code path, threads), as a
// manifest records them ("environment"): null for a variable that is not set.
nlohmann::ordered_json environment_json();

// The config a run was made with, parsed again from the manifest's config_text and
// config_overrides (the settings that decide how its cases are checked and skipped). Throws
// ConfigError when the manifest holds none or it no longer parses.
SweepConfig config_from_manifest(const nlohmann::ordered_json& manifest, const std::string& where);

// The peaks summarised in an existing manifest (for a resumed run: which peak a record names).
MeasuredPeaks peaks_from_manifest(const nlohmann::ordered_json& manifest);

}  // namespace attnbench
