// The host buffers a kernel streams (the packed inputs, O, dO, the gradients and the variants'
// workspaces): aligned to a cache line, and on huge pages where the OS offers them.
//
// Alignment: glibc's malloc puts a large block 16 bytes into its page, so a row of a multiple of
// 64 bytes straddled two cache lines and every 64-byte vector load of it was split across both,
// where a framework's tensors (PyTorch aligns to 64 bytes) start on a line.
// Huge pages: decode reads a KV cache of up to gigabytes once per token; on 4 KiB pages its TLB
// misses cost bf16 decode at 128K keys a third of its time (results/decode-kv-quant-amx), and
// Linux gives transparent huge pages to a mapping only when asked (`madvise`, the common setting)
// or always.
#pragma once

#include <cstddef>
#include <limits>
#include <new>
#include <vector>

namespace attnbench {

// `bytes` (rounded up to the alignment) aligned to 64 bytes, or to 2 MiB from 2 MiB up; on Linux
// the larger ones are advised MADV_HUGEPAGE before anything writes them, so the kernel backs them
// with huge pages where it can (advice only: where it is refused or THP is off, the buffer is the
// same, on small pages). Throws std::bad_alloc where the memory is not there.
void* allocate_host_bytes(std::size_t bytes);
void free_host_bytes(void* pointer) noexcept;

// std::allocator's interface over allocate_host_bytes.
template <class T>
class HostAllocator {
 public:
  using value_type = T;
  HostAllocator() noexcept = default;
  template <class U>
  HostAllocator(const HostAllocator<U>& /*other*/) noexcept {}  // NOLINT: implicit, as allocators
  T* allocate(std::size_t count) {
    if (count > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_alloc();
    return static_cast<T*>(allocate_host_bytes(count * sizeof(T)));
  }
  void deallocate(T* pointer, std::size_t /*count*/) noexcept { free_host_bytes(pointer); }
  template <class U>
  bool operator==(const HostAllocator<U>& /*other*/) const noexcept {
    return true;
  }
  template <class U>
  bool operator!=(const HostAllocator<U>& /*other*/) const noexcept {
    return false;
  }
};

// A vector on such memory; value-initialised (zeros) as a std::vector is.
template <class T>
using HostArray = std::vector<T, HostAllocator<T>>;
using HostBuffer = HostArray<std::byte>;

}  // namespace attnbench
