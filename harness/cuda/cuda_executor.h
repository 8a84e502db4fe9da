// Runs CUDA variants on device memory, timed by CUDA events on the executor's own stream. A
// sample is as many passes back to back as make it last min_sample_ms (harness/measure/
// sample_runs.h), so the host's launch latency is not timed; a sample after flush_cache() is one
// pass, the only one the flush leaves cold.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <unordered_map>

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
  int64_t runs_per_sample() const override { return last_runs_; }
  void fetch_outputs(std::vector<float>& o, std::vector<float>* weights) override;
  void fetch_gradients(std::vector<float>& dq, std::vector<float>& dk,
                       std::vector<float>& dv) override;
  void flush_cache() override;
  Workspace& workspace() override { return workspace_; }

 private:
  // The time of `runs` passes queued back to back, between two events.
  double time_runs_ms(Variant& variant, const Problem& problem, int64_t runs);

  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  Shape shape_;
  bool loaded_ = false;
  bool with_weights_ = false;
  DeviceBuffer q_, k_, v_, o_, weights_;
  DeviceBuffer block_table_, kv_lens_;  // paged and ragged shapes only
  DeviceBuffer dout_, dq_, dk_, dv_;    // for a shape whose pass needs the backward
  DeviceBuffer flush_buffer_;
  std::size_t flush_bytes_ = 0;
  unsigned flush_count_ = 0;
  bool flushed_ = false;  // flush_cache() since the last timed run
  // Each variant's passes per sample on the loaded inputs, chosen at its first timed run.
  std::unordered_map<const Variant*, int64_t> runs_per_sample_;
  int64_t last_runs_ = 1;
  DeviceWorkspace workspace_;
};

}  // namespace attnbench
