// GPU memory for the CUDA variants' scratch, through the same accounting as the host workspace,
// so footprints of CPU and GPU variants are measured the same way.
#pragma once

#include "harness/variant/workspace.h"

namespace attnbench {

// cudaMalloc'd memory; cudaMalloc aligns every allocation to at least 256 bytes.
class DeviceWorkspace final : public Workspace {
 public:
  ~DeviceWorkspace() override { release_all(); }

 protected:
  void* raw_allocate(std::size_t bytes) override;
  void raw_free(void* pointer) override;
};

}  // namespace attnbench
