// An owning, growable cudaMalloc'd buffer for the harness's own device memory (inputs, outputs,
// the cache-flush buffer, the peak-measurement matrices). Variants never use it: their scratch
// goes through the Workspace.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "harness/cuda/cuda_check.h"

namespace attnbench {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) { reserve(bytes); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }

  // Makes the buffer at least `bytes` long; the contents are not kept when it grows.
  void reserve(std::size_t bytes) {
    if (bytes <= bytes_ && data_ != nullptr) return;
    release();
    ATTNBENCH_CUDA_CHECK(cudaMalloc(&data_, bytes == 0 ? 1 : bytes));
    bytes_ = bytes;
  }

  void release() noexcept {
    if (data_ != nullptr && cudaFree(data_) != cudaSuccess) static_cast<void>(cudaGetLastError());
    data_ = nullptr;
    bytes_ = 0;
  }

  template <typename T = void>
  T* get() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace attnbench
