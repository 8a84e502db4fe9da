// What the harness knows about the GPU in a CUDA build. Never throws: a machine without a usable
// GPU is reported unavailable, with the CUDA runtime's own words for why.
#include <cuda_runtime_api.h>

#include <string>

#include "harness/measure/gpu.h"

namespace attnbench {

namespace {

// CUDA encodes versions as 1000 * major + 10 * minor.
std::string version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

GpuInfo unavailable(const std::string& call, cudaError_t error) {
  static_cast<void>(cudaGetLastError());  // not sticky here: nothing ran; clear it
  GpuInfo info;
  info.unavailable_reason = call + ": " + cudaGetErrorString(error);
  return info;
}

}  // namespace

GpuInfo query_gpu() {
  int count = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess) {
    return unavailable("cudaGetDeviceCount", error);
  }
  if (count <= 0) {
    GpuInfo info;
    info.unavailable_reason = "cudaGetDeviceCount found no CUDA device";
    return info;
  }
  int device = 0;
  if (const cudaError_t error = cudaGetDevice(&device); error != cudaSuccess) {
    return unavailable("cudaGetDevice", error);
  }
  cudaDeviceProp properties{};
  if (const cudaError_t error = cudaGetDeviceProperties(&properties, device);
      error != cudaSuccess) {
    return unavailable("cudaGetDeviceProperties", error);
  }
  GpuInfo info;
  info.available = true;
  info.name = properties.name;
  info.sm_count = properties.multiProcessorCount;
  info.compute_capability = properties.major * 10 + properties.minor;
  info.memory_bytes = properties.totalGlobalMem;
  info.l2_bytes = static_cast<std::size_t>(properties.l2CacheSize);
  int driver = 0, runtime = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess) info.driver_version = version_string(driver);
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
    info.runtime_version = version_string(runtime);
  static_cast<void>(cudaGetLastError());
  return info;
}

}  // namespace attnbench
