// Evicting a buffer from every level of the cache hierarchy, so the next read of it comes from
// memory. A bandwidth check or a cold-cache timing that instead writes "more than the last-level
// cache" of other data fails where that cache is large: a 2-core VM on a 300 MiB-L3 Xeon has its
// 192 MiB check arrays mostly in L3 when the host is quiet, and read 53-68 GB/s where the same
// arrays, evicted, and a 1.2 GiB stream both read 35 (results/decode-roof/README.md).
#pragma once

#include <cstddef>

namespace attnbench {

// The instruction evict_from_caches uses here: "clflushopt" (x86 that has it: 192 MiB in about 4
// ms on two threads), "clflush" (older x86: serialised, about 60x slower), "dc civac" (AArch64),
// or "" where this build has none (the caches are then left as they are).
const char* cache_eviction_instruction();

// Writes back and invalidates every cache line of [data, data + bytes) in every cache level of
// the coherence domain. Whole lines: the first and last may hold neighbouring bytes too, which
// are written back unchanged. Thread-safe; callers split a large buffer across threads.
void evict_from_caches(const void* data, std::size_t bytes);

}  // namespace attnbench
