// Out of memory as one line: a step that allocates runs under allocating(), and its
// std::bad_alloc becomes a std::runtime_error naming what was being allocated, about how much,
// and how much memory is available now (memory_limit.h), instead of "std::bad_alloc".
#pragma once

#include <new>
#include <string>

namespace attnbench {

// Throws "out of memory <what> (<bytes>); <available> of memory is available (<limit>)"; the size
// is left out when `bytes` is 0 (not known).
[[noreturn]] void throw_out_of_memory(const std::string& what, double bytes);

// Runs `step`, which allocates about `bytes` while `what` ("reading Q from q.npy"), and returns
// what it returns; out of memory is then throw_out_of_memory's one line.
template <class Step>
auto allocating(const std::string& what, double bytes, Step step) {
  try {
    return step();
  } catch (const std::bad_alloc&) {
    throw_out_of_memory(what, bytes);
  }
}

}  // namespace attnbench
