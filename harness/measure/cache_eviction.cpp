#include "harness/measure/cache_eviction.h"

#include <cstdint>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace attnbench {

namespace {

constexpr std::uintptr_t kLine = 64;  // the smallest line of the hosts we run on: never skips one

#if defined(__x86_64__)
// CPUID leaf 7, EBX bit 23 (read directly, as cpu_features.cpp reads its leaves).
bool has_clflushopt() {
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  return (ebx >> 23) & 1u;
}

const bool kClflushopt = has_clflushopt();

// Unordered with each other (clflush waits for each one); the fence orders them before the reads.
__attribute__((target("clflushopt"))) void flush_lines_unordered(std::uintptr_t first,
                                                                 std::uintptr_t end) {
  for (std::uintptr_t line = first; line < end; line += kLine)
    _mm_clflushopt(reinterpret_cast<void*>(line));
  _mm_sfence();
}

void flush_lines_serialised(std::uintptr_t first, std::uintptr_t end) {
  for (std::uintptr_t line = first; line < end; line += kLine)
    _mm_clflush(reinterpret_cast<const void*>(line));
  _mm_mfence();
}
#endif

}  // namespace

const char* cache_eviction_instruction() {
#if defined(__x86_64__)
  return kClflushopt ? "clflushopt" : "clflush";
#elif defined(__aarch64__)
  return "dc civac";
#else
  return "";
#endif
}

void evict_from_caches(const void* data, std::size_t bytes) {
  if (bytes == 0) return;
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t first = begin / kLine * kLine, end = begin + bytes;
#if defined(__x86_64__)
  if (kClflushopt)
    flush_lines_unordered(first, end);
  else
    flush_lines_serialised(first, end);
#elif defined(__aarch64__)
  // Linux lets user code clean and invalidate by address to the point of coherence (SCTLR_EL1.UCI).
  for (std::uintptr_t line = first; line < end; line += kLine)
    __asm__ volatile("dc civac, %0" : : "r"(line) : "memory");
  __asm__ volatile("dsb ish" : : : "memory");
#else
  static_cast<void>(first);
  static_cast<void>(end);
#endif
}

}  // namespace attnbench
