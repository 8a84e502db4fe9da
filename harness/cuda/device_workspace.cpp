#include "harness/cuda/device_workspace.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "harness/cuda/cuda_check.h"

namespace attnbench {

void* DeviceWorkspace::raw_allocate(std::size_t bytes) {
  void* pointer = nullptr;
  ATTNBENCH_CUDA_CHECK(cudaMalloc(&pointer, bytes));
  if (reinterpret_cast<std::uintptr_t>(pointer) % 256 != 0) {
    cudaFree(pointer);
    throw std::runtime_error("cudaMalloc returned memory not aligned to 256 bytes");
  }
  return pointer;
}

void DeviceWorkspace::raw_free(void* pointer) {
  // Called from destructors and release_all(): never throws. A lost context is reported by the
  // next checked call; any other error is cleared so it is not blamed on a later launch.
  if (cudaFree(pointer) != cudaSuccess) static_cast<void>(cudaGetLastError());
}

}  // namespace attnbench
