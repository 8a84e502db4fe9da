#include "harness/core/kv_cache.h"

namespace attnbench {

std::string to_string(const KvCacheSpec& spec) {
  if (!spec.is_paged()) return "contiguous";
  return "paged:" + std::to_string(spec.page_size);
}

}  // namespace attnbench
