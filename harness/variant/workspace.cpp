#include "harness/variant/workspace.h"

#include <fmt/format.h>

#include <cstdlib>
#include <limits>
#include <new>
#include <stdexcept>

#include "harness/core/checked_math.h"

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

void* HostWorkspace::raw_allocate(std::size_t bytes) {
  constexpr std::size_t alignment = 64;
  // A size the rounding below would wrap to a few bytes is one no host can give.
  if (bytes > std::numeric_limits<std::size_t>::max() - alignment) throw std::bad_alloc();
  const std::size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void* pointer = std::aligned_alloc(alignment, rounded);
  if (pointer == nullptr) throw std::bad_alloc();
  return pointer;
}

void HostWorkspace::raw_free(void* pointer) { std::free(pointer); }

}  // namespace attnbench
