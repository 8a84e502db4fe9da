#include "harness/measure/huge_pages.h"

#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace attnbench {

std::vector<std::byte> huge_page_buffer(std::size_t bytes) {
  std::vector<std::byte> buffer;
  // Reserving allocates without writing: glibc maps a block this large fresh, untouched.
  buffer.reserve(bytes);
#if defined(__linux__)
  constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<std::uintptr_t>(buffer.data());
  const std::uintptr_t first = (begin + kHugePage - 1) / kHugePage * kHugePage;
  const std::uintptr_t last = (begin + bytes) / kHugePage * kHugePage;
  // Advice: a refusal (no THP in this kernel) leaves small pages, which is what it had.
  if (bytes > 0 && last > first)
    (void)madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#endif
  buffer.resize(bytes);
  return buffer;
}

}  // namespace attnbench
