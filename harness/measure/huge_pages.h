// The inputs a kernel streams, on huge pages where the OS offers them. Decode reads a KV cache of
// up to gigabytes once per token; on 4 KiB pages its TLB misses cost bf16 decode at 128K keys a
// third of its time (results/decode-kv-quant-amx/README.md), and Linux gives transparent huge
// pages to a mapping only when asked (`madvise`, the common setting) or always.
#pragma once

#include <cstddef>
#include <vector>

namespace attnbench {

// A zero-filled buffer of `bytes`. On Linux its whole 2 MiB pages are advised MADV_HUGEPAGE
// before the first write (the zero fill), so the kernel backs them with huge pages where it can;
// the advice is only advice: where it is refused or THP is off, the buffer is the same, on small
// pages. Elsewhere a plain buffer.
std::vector<std::byte> huge_page_buffer(std::size_t bytes);

}  // namespace attnbench
