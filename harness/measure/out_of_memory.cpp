#include "harness/measure/out_of_memory.h"

#include <fmt/format.h>

#include <stdexcept>

#include "harness/measure/memory_limit.h"

namespace attnbench {

void throw_out_of_memory(const std::string& what, double bytes) {
  const MemoryLimit limit = memory_available_now();
  throw std::runtime_error(fmt::format("out of memory {}{}; {} of memory is available ({})", what,
                                       bytes > 0 ? " (" + memory_text(bytes) + ")" : "",
                                       memory_text(limit.bytes), limit.what));
}

}  // namespace attnbench
