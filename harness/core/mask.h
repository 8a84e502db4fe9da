// Attention masks and score modifiers as plain data, and the geometry every kernel, the oracle and
// the work count share: which keys a query row sees, and how a (rows, keys) tile relates to it.
//
// Masks are aligned to the end (as in PyTorch and FlashAttention): query row i sits at key
// position p(i) = i + seq_kv - seq_q, and key j is visible to row i when
//   none        always;
//   causal      j <= p(i);
//   window:L    p(i) - L <= j <= p(i)   (FlashAttention's window_size = (L, 0));
//   prefix:P    j < P, or j <= p(i)     (prefix-LM: the prefix is read bidirectionally);
//   documents   seq_q = seq_kv packed with documents of lengths doc_lens; causal within a
//               document, nothing across documents.
// Every row's visible keys form one contiguous range [first, last) (possibly empty), and both ends
// never decrease from one row to the next; the tile classifier and validation rely on both.
//
// Score modifiers, in the order FlashAttention-2 applies them (flash_fwd_kernel.h: softcap, then
// the mask's apply_mask, which adds the ALiBi bias before writing -inf to masked keys):
//   s = scale * q.k;  s = c * tanh(s / c) (softcap c > 0);  s -= slope_h * |p(i) - j| (ALiBi);
//   masked keys -> -inf.
// The ALiBi distance is |p(i) - j| as in FlashAttention: it is p(i) - j for every key a causal
// mask shows, and a key ahead of the query is penalised by its distance too (rather than favoured)
// under masks that show such keys (none, prefix).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attnbench {

enum class MaskKind { none, causal, window, prefix, documents };

const char* to_string(MaskKind kind);
const std::vector<MaskKind>& all_mask_kinds();

struct MaskSpec {
  MaskKind kind = MaskKind::none;
  // window: L, the keys seen before the query's own; prefix: P, the bidirectional prefix;
  // documents: K, the number of documents. Unused (0) for none and causal.
  int64_t length = 0;
  // documents: the K lengths, summing to seq_q = seq_kv. Drawn from a seed when a config asks for
  // "documents:K" (draw_document_lengths), or given (attend --doc-lens).
  std::vector<int64_t> doc_lens;

  static MaskSpec none() { return {}; }
  static MaskSpec causal() { return {MaskKind::causal, 0, {}}; }
  static MaskSpec window(int64_t keys_before) { return {MaskKind::window, keys_before, {}}; }
  static MaskSpec prefix(int64_t prefix_keys) { return {MaskKind::prefix, prefix_keys, {}}; }
  static MaskSpec documents(std::vector<int64_t> lengths) {
    const auto count = static_cast<int64_t>(lengths.size());
    return {MaskKind::documents, count, std::move(lengths)};
  }

  bool operator==(const MaskSpec& other) const {
    return kind == other.kind && length == other.length && doc_lens == other.doc_lens;
  }
  bool operator!=(const MaskSpec& other) const { return !(*this == other); }
};

// "none", "causal", "window:819", "prefix:64", "documents:16" (the lengths are not written).
std::string to_string(const MaskSpec& mask);

// Parses the form to_string writes. "documents:K" gives a spec with length K and no lengths yet.
// Returns nullopt, with a one-line reason in *error when given, for anything else.
std::optional<MaskSpec> parse_mask(const std::string& text, std::string* error = nullptr);

// K document lengths, each at least 1, summing to `tokens`: K - 1 distinct cut points drawn
// uniformly from 1 .. tokens - 1. The same (tokens, count, seed) gives the same lengths on every
// machine and standard library (the draw uses the raw 64-bit generator only). Needs
// 1 <= count <= tokens.
std::vector<int64_t> draw_document_lengths(int64_t tokens, int64_t count, uint64_t seed);

// ALiBi's slope for query head `head` of `heads`: 2^(-8 (head + 1) / heads), as in the paper.
double alibi_slope(int64_t head, int64_t heads);

// Keys [first, last) of one query row; empty when first == last.
struct KeyRange {
  int64_t first = 0;
  int64_t last = 0;
  int64_t size() const { return last - first; }
  bool empty() const { return last <= first; }
};

// How a tile of query rows x keys relates to the mask: skip it, compute it with no mask arithmetic,
// or compute it and mask element by element.
enum class TileVisibility { fully_masked, fully_visible, partial };

const char* to_string(TileVisibility visibility);

// The mask of one problem (a spec and the two sequence lengths), with the document boundaries
// summed once (O(K) memory, a binary search per row). Build it once per run, outside the inner
// loops.
class MaskGeometry {
 public:
  // documents needs doc_lens summing to seq_q = seq_kv (validate() checks; here it is assumed).
  MaskGeometry(const MaskSpec& spec, int64_t seq_q, int64_t seq_kv);

  // p(i) = i + seq_kv - seq_q: the key position query row i is aligned with.
  int64_t position(int64_t row) const { return row + seq_kv_ - seq_q_; }

  // Whether query row `row` sees key `key`.
  bool visible(int64_t row, int64_t key) const;

  // Every key query row `row` sees, as one range clamped to [0, seq_kv).
  KeyRange keys(int64_t row) const;

  // Rows [row_begin, row_end) against keys [key_begin, key_end) (both non-empty, in range):
  // fully_masked when no row sees any key of it, fully_visible when every row sees every key.
  TileVisibility classify(int64_t row_begin, int64_t row_end, int64_t key_begin,
                          int64_t key_end) const;

  // The smallest key range holding every key rows [row_begin, row_end) see: key tiles outside it
  // are fully masked, so a kernel can loop over tiles inside it only.
  KeyRange keys_of_rows(int64_t row_begin, int64_t row_end) const;

  // Query-key pairs left unmasked, summed over the rows.
  int64_t visible_pairs() const;

  const MaskSpec& spec() const { return spec_; }

 private:
  MaskSpec spec_;
  int64_t seq_q_ = 0;
  int64_t seq_kv_ = 0;
  std::vector<int64_t> document_starts_;  // documents: the first row of each document, ascending
};

}  // namespace attnbench
