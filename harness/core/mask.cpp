#include "harness/core/mask.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <random>
#include <unordered_set>

namespace attnbench {

const char* to_string(MaskKind kind) {
  switch (kind) {
    case MaskKind::none: return "none";
    case MaskKind::causal: return "causal";
    case MaskKind::window: return "window";
    case MaskKind::prefix: return "prefix";
    case MaskKind::documents: return "documents";
  }
  return "unknown";
}

const std::vector<MaskKind>& all_mask_kinds() {
  static const std::vector<MaskKind> kinds{MaskKind::none, MaskKind::causal, MaskKind::window,
                                           MaskKind::prefix, MaskKind::documents};
  return kinds;
}

const char* to_string(TileVisibility visibility) {
  switch (visibility) {
    case TileVisibility::fully_masked: return "fully_masked";
    case TileVisibility::fully_visible: return "fully_visible";
    case TileVisibility::partial: return "partial";
  }
  return "unknown";
}

std::string to_string(const MaskSpec& mask) {
  switch (mask.kind) {
    case MaskKind::none:
    case MaskKind::causal: return to_string(mask.kind);
    case MaskKind::window:
    case MaskKind::prefix:
    case MaskKind::documents: return fmt::format("{}:{}", to_string(mask.kind), mask.length);
  }
  return "unknown";
}

std::optional<MaskSpec> parse_mask(const std::string& text, std::string* error) {
  const auto fail = [&](const std::string& reason) -> std::optional<MaskSpec> {
    if (error != nullptr) *error = reason;
    return std::nullopt;
  };
  const auto colon = text.find(':');
  const std::string name = text.substr(0, colon);
  if (colon == std::string::npos) {
    if (name == "none") return MaskSpec::none();
    if (name == "causal") return MaskSpec::causal();
    if (name == "window" || name == "prefix" || name == "documents")
      return fail(fmt::format("'{}' needs a length: {}:N", text, name));
    return fail(fmt::format(
        "unknown mask '{}' (expected none, causal, window:L, prefix:P or documents:K)", text));
  }
  const std::string number = text.substr(colon + 1);
  if (name != "window" && name != "prefix" && name != "documents") {
    return fail(fmt::format(
        "unknown mask '{}' (expected none, causal, window:L, prefix:P or documents:K)", text));
  }
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(number.c_str(), &end, 10);
  if (number.empty() || end != number.c_str() + number.size() ||
      !(std::isdigit(static_cast<unsigned char>(number[0])) || number[0] == '-')) {
    return fail(fmt::format("'{}': '{}' is not an integer", text, number));
  }
  if (errno == ERANGE)
    return fail(
        fmt::format("'{}': '{}' is out of range (a length is 0 to 2^63 - 1)", text, number));
  if (name == "window") {
    if (value < 0) return fail(fmt::format("'{}': the window length must be 0 or more", text));
    return MaskSpec::window(value);
  }
  if (name == "prefix") {
    if (value < 0) return fail(fmt::format("'{}': the prefix length must be 0 or more", text));
    return MaskSpec::prefix(value);
  }
  if (value < 1) return fail(fmt::format("'{}': needs at least 1 document", text));
  MaskSpec spec;
  spec.kind = MaskKind::documents;
  spec.length = value;
  return spec;
}

std::vector<int64_t> draw_document_lengths(int64_t tokens, int64_t count, uint64_t seed) {
  // Floyd's sampling of count - 1 distinct cut points from 1 .. tokens - 1; the modulo of the raw
  // generator (not std::uniform_int_distribution, whose algorithm each library chooses) keeps the
  // lengths the same everywhere. Its bias, below 2^-40 for any realistic length, is immaterial.
  std::mt19937_64 rng(seed);
  const auto below = [&rng](int64_t bound) {
    return static_cast<int64_t>(rng() % static_cast<uint64_t>(bound));
  };
  const int64_t cuts_wanted = count - 1;
  const int64_t candidates = tokens - 1;
  std::unordered_set<int64_t> chosen;
  std::vector<int64_t> cuts;
  for (int64_t top = candidates - cuts_wanted; top < candidates; ++top) {
    int64_t cut = 1 + below(top + 1);  // in 1 .. top + 1
    if (!chosen.insert(cut).second) {
      cut = top + 1;
      chosen.insert(cut);
    }
    cuts.push_back(cut);
  }
  std::sort(cuts.begin(), cuts.end());
  std::vector<int64_t> lengths;
  int64_t start = 0;
  for (int64_t cut : cuts) {
    lengths.push_back(cut - start);
    start = cut;
  }
  lengths.push_back(tokens - start);
  return lengths;
}

double alibi_slope(int64_t head, int64_t heads) {
  return std::exp2(-8.0 * static_cast<double>(head + 1) / static_cast<double>(heads));
}

MaskGeometry::MaskGeometry(const MaskSpec& spec, int64_t seq_q, int64_t seq_kv)
    : spec_(spec), seq_q_(seq_q), seq_kv_(seq_kv) {
  if (spec_.kind != MaskKind::documents) return;
  int64_t start = 0;
  for (int64_t length : spec_.doc_lens) {
    document_starts_.push_back(start);
    start += length;
  }
}

KeyRange MaskGeometry::keys(int64_t row) const {
  const int64_t p = position(row);
  KeyRange range{0, seq_kv_};
  switch (spec_.kind) {
    case MaskKind::none: break;
    case MaskKind::causal: range.last = p + 1; break;
    case MaskKind::window:
      // A window wider than the position starts at key 0; p - L itself could wrap below int64
      // for a huge L and a row ahead of the keys (p < 0).
      range.first = spec_.length >= p ? 0 : p - spec_.length;
      range.last = p + 1;
      break;
    case MaskKind::prefix: range.last = std::max(spec_.length, p + 1); break;
    case MaskKind::documents: {
      // The last document starting at or before the row is the row's own.
      const auto after = std::upper_bound(document_starts_.begin(), document_starts_.end(), row);
      range.first = after == document_starts_.begin() ? 0 : *(after - 1);
      range.last = p + 1;
      break;
    }
  }
  range.first = std::clamp<int64_t>(range.first, 0, seq_kv_);
  range.last = std::clamp<int64_t>(range.last, range.first, seq_kv_);
  return range;
}

bool MaskGeometry::visible(int64_t row, int64_t key) const {
  const KeyRange range = keys(row);
  return key >= range.first && key < range.last;
}

TileVisibility MaskGeometry::classify(int64_t row_begin, int64_t row_end, int64_t key_begin,
                                      int64_t key_end) const {
  // Row by row: a tile has far fewer rows than it has multiply-adds, so this costs nothing beside
  // the tile, and it needs no property of the mask beyond one contiguous range per row.
  bool any_visible = false;
  bool all_visible = true;
  for (int64_t row = row_begin; row < row_end; ++row) {
    const KeyRange range = keys(row);
    const int64_t overlap = std::min(range.last, key_end) - std::max(range.first, key_begin);
    if (overlap > 0) any_visible = true;
    if (overlap < key_end - key_begin) all_visible = false;
  }
  if (!any_visible) return TileVisibility::fully_masked;
  return all_visible ? TileVisibility::fully_visible : TileVisibility::partial;
}

KeyRange MaskGeometry::keys_of_rows(int64_t row_begin, int64_t row_end) const {
  // Both ends of the rows' ranges never decrease with the row, so the first row's start and the
  // last row's end bound them all (empty rows, whose range is not anchored, are skipped).
  KeyRange hull{seq_kv_, 0};
  for (int64_t row = row_begin; row < row_end; ++row) {
    const KeyRange range = keys(row);
    if (range.empty()) continue;
    hull.first = std::min(hull.first, range.first);
    hull.last = std::max(hull.last, range.last);
    break;
  }
  for (int64_t row = row_end - 1; row >= row_begin; --row) {
    const KeyRange range = keys(row);
    if (range.empty()) continue;
    hull.first = std::min(hull.first, range.first);
    hull.last = std::max(hull.last, range.last);
    break;
  }
  if (hull.last <= hull.first) return {0, 0};
  return hull;
}

int64_t MaskGeometry::visible_pairs() const {
  if (spec_.kind == MaskKind::none) return seq_q_ * seq_kv_;
  int64_t pairs = 0;
  for (int64_t row = 0; row < seq_q_; ++row) pairs += keys(row).size();
  return pairs;
}

}  // namespace attnbench
