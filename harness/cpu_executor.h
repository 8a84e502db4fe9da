// Runs CPU variants on host memory, timed by the wall clock.
#pragma once

#include "harness/executor.h"

namespace attnbench {

class CpuExecutor final : public Executor {
 public:
  void load(const HostTensors& inputs, bool with_weights) override;
  Problem problem(float scale) const override;
  void poison_outputs() override;
  double timed_run_ms(Variant& variant, const Problem& problem) override;
  void fetch_outputs(std::vector<float>& o, std::vector<float>* weights) override;
  void flush_cache() override;
  Workspace& workspace() override { return workspace_; }

 private:
  const HostTensors* inputs_ = nullptr;
  std::vector<float> o_, weights_;
  std::vector<char> flush_buffer_;
  HostWorkspace workspace_;
};

}  // namespace attnbench
