// The run manifest: everything needed to trust, reproduce and compare a run's numbers.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "harness/config.h"

namespace attnbench {

struct MeasuredPeaks {
  double cpu_gflops = 0;  // the FMA peak on all threads: the "% of peak" of CPU records
  double gpu_gflops = 0;  // the cuBLAS SGEMM peak: the "% of peak" of fp32 CUDA records
  double gpu_tf32_gflops = 0;
};

// Measures the peaks (about a second per device; the GPU only when `with_gpu`) and describes the
// machine, build and config.
nlohmann::ordered_json make_manifest(const SweepConfig& config, const std::string& command_line,
                                     const std::string& shard, bool with_gpu, MeasuredPeaks& peaks);

// The peaks stored in an existing manifest (for a resumed run).
MeasuredPeaks peaks_from_manifest(const nlohmann::ordered_json& manifest);

}  // namespace attnbench
