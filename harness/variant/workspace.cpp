#include "harness/variant/workspace.h"

#include <cstdlib>
#include <new>

namespace attnbench {

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
  const std::size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void* pointer = std::aligned_alloc(alignment, rounded);
  if (pointer == nullptr) throw std::bad_alloc();
  return pointer;
}

void HostWorkspace::raw_free(void* pointer) { std::free(pointer); }

}  // namespace attnbench
