// All scratch memory a variant uses goes through a Workspace, so the harness can measure each
// variant's real footprint (and chart O(n^2) against O(n) memory) and refuse what cannot fit.
#pragma once

#include <cstddef>
#include <vector>

namespace attnbench {

class Workspace {
 public:
  virtual ~Workspace() = default;

  // Returns `bytes` of memory aligned to 64 bytes (host) or 256 bytes (device), owned by the
  // workspace until release_all(). Throws std::bad_alloc-derived or std::runtime_error on failure.
  void* allocate(std::size_t bytes);

  // `count` elements of T; a count whose size in bytes overflows is refused (std::runtime_error
  // naming the count), not wrapped into a small block the variant then writes past.
  template <typename T>
  T* allocate_array(std::size_t count) {
    return static_cast<T*>(allocate(array_bytes(count, sizeof(T))));
  }

  // Frees everything allocated so far; the peak stays recorded until reset_peak().
  void release_all();

  std::size_t current_bytes() const { return current_bytes_; }
  std::size_t peak_bytes() const { return peak_bytes_; }
  void reset_peak() { peak_bytes_ = current_bytes_; }

 protected:
  virtual void* raw_allocate(std::size_t bytes) = 0;
  virtual void raw_free(void* pointer) = 0;

 private:
  static std::size_t array_bytes(std::size_t count, std::size_t element_bytes);

  struct Block {
    void* pointer;
    std::size_t bytes;
  };
  std::vector<Block> blocks_;
  std::size_t current_bytes_ = 0;
  std::size_t peak_bytes_ = 0;
};

// Host memory, 64-byte aligned (one cache line, one AVX-512 register), on huge pages from 2 MiB up
// where the OS offers them (harness/core/host_buffer.h).
class HostWorkspace final : public Workspace {
 public:
  ~HostWorkspace() override { release_all(); }

 protected:
  void* raw_allocate(std::size_t bytes) override;
  void raw_free(void* pointer) override;
};

}  // namespace attnbench
