#include "harness/core/host_buffer.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace attnbench {

void* allocate_host_bytes(std::size_t bytes) {
  constexpr std::size_t kLine = 64;
  constexpr std::size_t kHugePage = std::size_t{2} << 20;
  const std::size_t alignment = bytes >= kHugePage ? kHugePage : kLine;
  // A size the rounding below would wrap to a few bytes is one no host can give.
  if (bytes > std::numeric_limits<std::size_t>::max() - alignment) throw std::bad_alloc();
  // aligned_alloc takes sizes that are multiples of the alignment; zero bytes get one line.
  const std::size_t rounded = std::max(alignment, (bytes + alignment - 1) / alignment * alignment);
  void* pointer = std::aligned_alloc(alignment, rounded);
  if (pointer == nullptr) throw std::bad_alloc();
#if defined(__linux__)
  // Advice: a refusal (no THP in this kernel) leaves small pages, which is what it had.
  if (alignment == kHugePage) (void)madvise(pointer, rounded, MADV_HUGEPAGE);
#endif
  return pointer;
}

void free_host_bytes(void* pointer) noexcept { std::free(pointer); }

}  // namespace attnbench
