// Built only when CUDA is not: the GPU is reported unavailable with the reason.
#include <stdexcept>

#include "harness/measure/gpu.h"

namespace attnbench {

GpuInfo query_gpu() {
  GpuInfo info;
  info.unavailable_reason = "attnbench was built without CUDA";
  return info;
}

std::unique_ptr<Executor> make_cuda_executor() {
  throw std::runtime_error("attnbench was built without CUDA");
}

GpuPeaks measure_gpu_peaks() { return {}; }

}  // namespace attnbench
