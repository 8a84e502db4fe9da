// How the K and V of a case are stored: contiguous tensors, or a paged cache (vLLM's
// PagedAttention, FlashInfer): a pool of pages of `page_size` tokens and a block table per
// sequence that names the pool page holding each run of page_size keys. Pages are placed in the
// pool in a seeded, shuffled order, so a kernel that reads through the table gets no locality for
// free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attnbench {

enum class KvCacheKind { contiguous, paged };

struct KvCacheSpec {
  KvCacheKind kind = KvCacheKind::contiguous;
  int64_t page_size = 0;  // tokens per page; 0 for contiguous

  static KvCacheSpec contiguous() { return {}; }
  static KvCacheSpec paged(int64_t tokens_per_page) {
    return {KvCacheKind::paged, tokens_per_page};
  }
  bool is_paged() const { return kind == KvCacheKind::paged; }
  bool operator==(const KvCacheSpec& other) const {
    return kind == other.kind && page_size == other.page_size;
  }
  bool operator!=(const KvCacheSpec& other) const { return !(*this == other); }
};

// "contiguous" or "paged:16".
std::string to_string(const KvCacheSpec& spec);

// Reads "contiguous" or "paged:P" (P a whole number of tokens, 1 or more); nullopt with a
// one-line reason in `error` otherwise.
std::optional<KvCacheSpec> parse_kv_cache(const std::string& text, std::string* error = nullptr);

// Reads a ragged batch's cache lengths, "1024,4096,65536,512": whole numbers, comma-separated,
// each 1 or more; nullopt with a one-line reason in `error` otherwise (the limit on each length is
// validate()'s, shape.h).
std::optional<std::vector<int64_t>> parse_kv_lens(const std::string& text,
                                                  std::string* error = nullptr);

}  // namespace attnbench
