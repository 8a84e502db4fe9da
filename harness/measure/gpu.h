// What the harness knows about the GPU, with or without CUDA compiled in. The CUDA build
// implements these in harness/cuda/; a CPU-only build uses harness/measure/gpu_absent.cpp.
#pragma once

#include <memory>
#include <string>

#include "harness/measure/executor.h"

namespace attnbench {

struct GpuInfo {
  bool available = false;
  std::string unavailable_reason;  // e.g. "built without CUDA", or cudaGetDeviceCount's error
  std::string name;
  int sm_count = 0;
  int compute_capability = 0;  // 90 for sm_90
  std::size_t memory_bytes = 0;
  std::size_t l2_bytes = 0;
  std::string driver_version;   // e.g. "13.0"
  std::string runtime_version;  // e.g. "13.0"
};

GpuInfo query_gpu();

// Only called when query_gpu().available.
std::unique_ptr<Executor> make_cuda_executor();

// Throughput the GPU reaches on a large cuBLAS SGEMM (fp32), TF32, bf16 and fp16 GEMM, in GFLOP/s,
// and the device-to-device copy bandwidth in GB/s; zero when unavailable.
struct GpuPeaks {
  double sgemm_gflops = 0;
  double tf32_gemm_gflops = 0;
  double bf16_gemm_gflops = 0;  // bf16 inputs, fp32 accumulation
  double fp16_gemm_gflops = 0;
  double copy_gbps = 0;
};
GpuPeaks measure_gpu_peaks();

}  // namespace attnbench
