// Runs CPU variants on host memory, timed by the wall clock.
#pragma once

#include <cstddef>
#include <vector>

#include "harness/measure/executor.h"
#include "harness/measure/tensor_packing.h"

namespace attnbench {

class CpuExecutor final : public Executor {
 public:
  void load(const HostTensors& inputs, bool with_weights) override;
  Problem problem(float scale) const override;
  void poison_outputs() override;
  double timed_run_ms(Variant& variant, const Problem& problem) override;
  void fetch_outputs(std::vector<float>& o, std::vector<float>* weights) override;
  void fetch_gradients(std::vector<float>& dq, std::vector<float>& dk,
                       std::vector<float>& dv) override;
  void flush_cache() override;
  Workspace& workspace() override { return workspace_; }
  void release_tensors() override;

 private:
  Shape shape_;
  PackedInputs inputs_;
  std::vector<int32_t> block_table_;        // a paged shape's (host_tensors.h); empty otherwise
  std::vector<float> k_scales_, v_scales_;  // a quantized cache's (host_tensors.h); else empty
  HostBuffer o_;
  std::vector<float> weights_;
  HostBuffer dout_;                // dO in the dtype and layout; empty for forward cases
  HostArray<float> dq_, dk_, dv_;  // fp32 in the layout; empty for forward cases
  std::vector<char> flush_buffer_;
  HostWorkspace workspace_;
};

}  // namespace attnbench
