#include "harness/core/kv_cache.h"

#include <charconv>

namespace attnbench {

namespace {

// A whole number filling all of `text`, or nullopt (from_chars: no locale, no overflow);
// `too_large`, when given, says whether the text was digits past int64 (named so, not as "not a
// whole number").
std::optional<int64_t> whole_number(const std::string& text, bool* too_large = nullptr) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (too_large != nullptr) *too_large = error == std::errc::result_out_of_range && stop == end;
  if (text.empty() || error != std::errc() || stop != end) return std::nullopt;
  return value;
}

void set_error(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
}

}  // namespace

std::string to_string(const KvCacheSpec& spec) {
  if (!spec.is_paged()) return "contiguous";
  return "paged:" + std::to_string(spec.page_size);
}

std::optional<KvCacheSpec> parse_kv_cache(const std::string& text, std::string* error) {
  if (text == "contiguous") return KvCacheSpec::contiguous();
  const std::string prefix = "paged:";
  if (text.compare(0, prefix.size(), prefix) != 0) {
    set_error(error, "unknown kv_cache '" + text + "' (expected contiguous or paged:P)");
    return std::nullopt;
  }
  bool too_large = false;
  const std::optional<int64_t> page_size = whole_number(text.substr(prefix.size()), &too_large);
  if (too_large) {
    set_error(error, "kv_cache '" + text + "': the page size P is past int64");
    return std::nullopt;
  }
  if (!page_size || *page_size < 1) {
    set_error(error, "kv_cache '" + text +
                         "': the page size P must be a whole number of tokens, 1 or more");
    return std::nullopt;
  }
  return KvCacheSpec::paged(*page_size);
}

std::optional<std::vector<int64_t>> parse_kv_lens(const std::string& text, std::string* error) {
  std::vector<int64_t> lengths;
  std::string::size_type start = 0;
  while (true) {
    const std::string::size_type comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    bool too_large = false;
    const std::optional<int64_t> length = whole_number(item, &too_large);
    if (too_large) {
      set_error(error, "kv_lens '" + text + "': cache length '" + item + "' is past int64");
      return std::nullopt;
    }
    if (!length || *length < 1) {
      set_error(error, "kv_lens '" + text +
                           "': each cache length must be a whole number, 1 or more (got '" + item +
                           "')");
      return std::nullopt;
    }
    lengths.push_back(*length);
    if (comma == std::string::npos) return lengths;
    start = comma + 1;
  }
}

}  // namespace attnbench
