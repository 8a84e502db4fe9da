// How much memory this process may still allocate: the least of the host's available memory
// (MemAvailable), what its cgroup allows beyond what the cgroup already uses (v2 memory.max less
// memory.current, v1 memory.limit_in_bytes less memory.usage_in_bytes, on the process's own
// cgroup and each one above it), and the address-space and data rlimits (RLIMIT_AS, RLIMIT_DATA)
// less what is already mapped. A case is checked against it before its memory is allocated, so
// one that cannot fit is skipped with the reason instead of being killed by the OOM killer or
// failing with std::bad_alloc. Read anew each time: usage changes as a run goes.
#pragma once

#include <string>

namespace attnbench {

struct MemoryLimit {
  double bytes = 0;  // what may still be allocated; 0 when no limit is known
  std::string
      what;  // which limit that is, e.g. "the cgroup's memory limit 2.0 GiB less 1.2 GiB in use"
  // What may still be mapped, where RLIMIT_AS or RLIMIT_DATA is set: the least of their
  // headroom (empty address_space_what when neither is). What a library maps without touching it
  // counts against these limits, not against the memory available.
  double address_space = 0;
  std::string address_space_what;
};

MemoryLimit memory_available_now();

// "512.0 MiB": bytes as the messages about memory print them.
std::string memory_text(double bytes);

// Empty when `needed` bytes fit in `limit` with a tenth to spare (the allocator's own overhead,
// the estimate's slack), and `needed` and `reserved` (what a library maps for itself,
// Variant::reserved_address_space) fit in what may still be mapped likewise; else "needs X,
// but only Y of memory is available (<limit.what>)", or the same of what may be mapped.
std::string memory_shortfall(double needed, const MemoryLimit& limit, double reserved = 0);

}  // namespace attnbench
