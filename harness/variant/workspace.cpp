#include "harness/variant/workspace.h"

#include <fmt/format.h>

#include <limits>
#include <stdexcept>

#include "harness/core/checked_math.h"
#include "harness/core/host_buffer.h"

namespace attnbench {

std::size_t Workspace::array_bytes(std::size_t count, std::size_t element_bytes) {
  constexpr auto largest = static_cast<std::size_t>(std::numeric_limits<int64_t>::max());
  const std::optional<int64_t> bytes =
      count <= largest
          ? checked_mul(static_cast<int64_t>(count), static_cast<int64_t>(element_bytes))
          : std::nullopt;
  if (!bytes) {
    throw std::runtime_error(
        fmt::format("workspace: an array of {} elements of {} bytes overflows the size of memory",
                    count, element_bytes));
  }
  return static_cast<std::size_t>(*bytes);
}

void* Workspace::allocate(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  void* pointer = raw_allocate(bytes);
  blocks_.push_back({pointer, bytes});
  current_bytes_ += bytes;
  if (current_bytes_ > peak_bytes_) peak_bytes_ = current_bytes_;
  return pointer;
}

void Workspace::release_all() {
  for (const Block& block : blocks_) raw_free(block.pointer);
  blocks_.clear();
  current_bytes_ = 0;
}

// The buffers a kernel streams, as the harness allocates them (host_buffer.h): aligned to a
// cache line, and on huge pages from 2 MiB up (the backward's per-thread dQ copies among them).
void* HostWorkspace::raw_allocate(std::size_t bytes) { return allocate_host_bytes(bytes); }

void HostWorkspace::raw_free(void* pointer) { free_host_bytes(pointer); }

}  // namespace attnbench
