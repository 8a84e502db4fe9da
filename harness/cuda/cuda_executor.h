// Runs CUDA variants on device memory, timed by CUDA events on the executor's own stream.
#pragma once

#include <cuda_runtime_api.h>

#include "harness/cuda/device_buffer.h"
#include "harness/cuda/device_workspace.h"
#include "harness/measure/executor.h"

namespace attnbench {

class CudaExecutor final : public Executor {
 public:
  CudaExecutor();
  ~CudaExecutor() override;
  CudaExecutor(const CudaExecutor&) = delete;
  CudaExecutor& operator=(const CudaExecutor&) = delete;

  void load(const HostTensors& inputs, bool with_weights) override;
  Problem problem(float scale) const override;
  void poison_outputs() override;
  double timed_run_ms(Variant& variant, const Problem& problem) override;
  void fetch_outputs(std::vector<float>& o, std::vector<float>* weights) override;
  void flush_cache() override;
  Workspace& workspace() override { return workspace_; }

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  Shape shape_;
  bool loaded_ = false;
  bool with_weights_ = false;
  DeviceBuffer q_, k_, v_, o_, weights_;
  DeviceBuffer flush_buffer_;
  std::size_t flush_bytes_ = 0;
  unsigned flush_count_ = 0;
  DeviceWorkspace workspace_;
};

}  // namespace attnbench
