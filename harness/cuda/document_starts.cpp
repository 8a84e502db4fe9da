#include "harness/cuda/document_starts.h"

#include <cuda_runtime_api.h>

#include <vector>

#include "harness/cuda/cuda_check.h"
#include "harness/cuda/mask_math.h"

namespace attnbench {

const int* upload_document_starts(const MaskSpec& mask, Workspace& workspace) {
  const std::vector<int> starts = mask_math::document_starts(mask);
  if (starts.empty()) return nullptr;
  int* device_starts = workspace.allocate_array<int>(starts.size());
  ATTNBENCH_CUDA_CHECK(cudaMemcpy(device_starts, starts.data(), starts.size() * sizeof(int),
                                  cudaMemcpyHostToDevice));
  // From pageable memory cudaMemcpy may return before the copy reaches the device, and the
  // kernels that read the rows run on a non-blocking stream, unordered with this copy's.
  ATTNBENCH_CUDA_CHECK(cudaDeviceSynchronize());
  return device_starts;
}

}  // namespace attnbench
