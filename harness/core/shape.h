// The problem shape every variant, the oracle and the sweep agree on.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "harness/core/dtype.h"
#include "harness/core/kv_cache.h"
#include "harness/core/kv_quant.h"
#include "harness/core/mask.h"
#include "harness/core/pass.h"

namespace attnbench {

// The tensors, in the element type `dtype` and the layout `layout` (bhsd shown; bshd swaps the
// heads and seq dimensions, see tensor.h):
//   Q [batch, heads,    seq_q,  d_k]    K [batch, kv_heads, seq_kv, d_k]
//   V [batch, kv_heads, seq_kv, d_v]    O [batch, heads,    seq_q,  d_v]
//   weights (optional, always fp32 bhsd) [batch, heads, seq_q, seq_kv]
// Query head h reads key/value head h / (heads / kv_heads) (GQA; MQA when kv_heads = 1).
struct Shape {
  int64_t batch = 1;
  int64_t heads = 1;
  int64_t kv_heads = 1;
  int64_t seq_q = 1;
  int64_t seq_kv = 1;
  int64_t d_k = 1;
  int64_t d_v = 1;
  // Which keys each query row sees (mask.h), and the score modifiers: ALiBi's linear distance
  // bias, and soft-capping s -> softcap * tanh(s / softcap) when softcap > 0.
  MaskSpec mask;
  bool alibi = false;
  double softcap = 0;
  // True exactly when mask.kind is causal: the name variants written before the mask axis read.
  // Set the mask with set_mask(), which keeps the two in step; validate() refuses a shape where
  // they differ.
  bool causal = false;
  DType dtype = DType::fp32;
  Layout layout = Layout::bhsd;
  // The pass timed (pass.h): fwd unless a config's `pass` axis asks for bwd or fwd_bwd.
  Pass pass = Pass::fwd;
  // Ragged batches (FlashAttention's varlen, cu_seqlens): when not empty, batch entries, the keys
  // in each sequence's cache; seq_kv is then the longest and sequence b reads keys
  // [0, kv_lens[b]) (masks align to each sequence's own end). Empty: every sequence holds seq_kv.
  std::vector<int64_t> kv_lens;
  // How K and V are stored (kv_cache.h): contiguous tensors, or pages through a block table.
  KvCacheSpec kv_cache;
  // The element type K and V are stored in (kv_quant.h): the case's dtype, or int8 or fp8_e4m3
  // codes with fp32 scales. Quantized caches are forward-only and
  // take any seq_q: a prefill over a quantized cache reads the same codes as a decode step.
  // unsupported_reason() (variant.h) skips a backward case, and a variant that reads no such
  // cache.
  KvDType kv_dtype = KvDType::case_dtype;

  void set_mask(MaskSpec spec) {
    causal = spec.kind == MaskKind::causal;
    mask = std::move(spec);
  }
  MaskGeometry mask_geometry() const { return MaskGeometry(mask, seq_q, seq_kv); }

  int64_t group_size() const { return heads / kv_heads; }
  // The keys sequence `batch_index` holds: kv_lens[batch_index] in a ragged batch, else seq_kv.
  int64_t keys_of(int64_t batch_index) const {
    return kv_lens.empty() ? seq_kv : kv_lens[static_cast<std::size_t>(batch_index)];
  }
  // The mask of sequence `batch_index`, aligned to its own end (keys_of(batch_index) keys).
  MaskGeometry mask_geometry_of(int64_t batch_index) const {
    return MaskGeometry(mask, seq_q, keys_of(batch_index));
  }
  // A paged cache (kv_cache.h): the block table's entries per sequence (seq_kv over the page
  // size, rounded up), and the pages in the pool (each sequence's own keys over the page size,
  // rounded up, summed). 0 for a contiguous cache.
  int64_t pages_per_sequence() const {
    if (!kv_cache.is_paged() || kv_cache.page_size < 1) return 0;  // validate() refuses < 1
    return (seq_kv + kv_cache.page_size - 1) / kv_cache.page_size;
  }
  int64_t pool_pages() const {
    if (!kv_cache.is_paged() || kv_cache.page_size < 1) return 0;
    int64_t pages = 0;
    for (int64_t b = 0; b < batch; ++b)
      pages += (keys_of(b) + kv_cache.page_size - 1) / kv_cache.page_size;
    return pages;
  }
  // The batch and row extents K and V are stored with: [batch, seq_kv] contiguous, [pool pages,
  // page size] paged (the view's batch index is then the pool page).
  int64_t kv_stored_batch() const { return kv_cache.is_paged() ? pool_pages() : batch; }
  int64_t kv_stored_rows() const { return kv_cache.is_paged() ? kv_cache.page_size : seq_kv; }
  int64_t q_elements() const { return batch * heads * seq_q * d_k; }
  int64_t k_elements() const { return kv_stored_batch() * kv_heads * kv_stored_rows() * d_k; }
  int64_t v_elements() const { return kv_stored_batch() * kv_heads * kv_stored_rows() * d_v; }
  int64_t o_elements() const { return batch * heads * seq_q * d_v; }
  int64_t weight_elements() const { return batch * heads * seq_q * seq_kv; }

  // One past the last key query row `row` sees (unclamped). Masks are aligned to the end (as in
  // PyTorch and FlashAttention): under the causal mask row i sees keys 0 .. i + (seq_kv - seq_q).
  // For none, causal and prefix, keys [0, visible_keys(row)) are exactly the visible ones; window
  // and documents also hide keys at the start of that range: ask mask_geometry().keys(row).
  int64_t visible_keys(int64_t row) const {
    const int64_t after_position = row + (seq_kv - seq_q) + 1;
    switch (mask.kind) {
      case MaskKind::none: return seq_kv;
      case MaskKind::prefix: return std::max(mask.length, after_position);
      case MaskKind::causal:
      case MaskKind::window:
      case MaskKind::documents: return after_position;
    }
    return seq_kv;
  }
};

// The soft-caps kernels can apply in float32: a normal float32 value, with room for the base-2
// form c·log2(e) some kernels use. Beyond them (1e300, a denormal such as 5e-324) the cap turns
// into infinity or zero on the way to float32 and every score into NaN.
inline constexpr double min_softcap = 1.17549435082228750797e-38;  // FLT_MIN
inline constexpr double max_softcap = 1e38;

// Empty when `softcap` is 0 (off) or a cap in [min_softcap, max_softcap]; otherwise a reason,
// e.g. "must be 0 (off) or between 1.2e-38 and 1e+38 (a normal float32 value), got 1e+300".
std::string softcap_problem(double softcap);

// Empty when the shape is valid; otherwise a one-line reason naming the problem.
std::string validate(const Shape& shape);

// "b1 h8/8 q128 kv128 dk64 dv64 causal bf16 bshd", with "window:819 alibi softcap:30" in place of
// "causal" where set (no mask, no modifier, fp32 and bhsd, the defaults, are not written) — used
// in test names, logs and records.
std::string describe(const Shape& shape);

// The longest cache a sequence of a ragged batch, or a page, may hold: 16M keys. Beyond it a
// length is a typo, and its K and V would not fit in any machine this runs on.
inline constexpr int64_t max_kv_len = int64_t{1} << 24;

// The name of the element type K and V are stored in: "int8" or "fp8_e4m3" for a quantized
// cache, else the case's dtype ("bf16"), as records and the loader spell it.
std::string kv_dtype_name(const Shape& shape);

// The fp32 scales of a quantized cache, each of K and V: one per stored (token, KV head) row for
// int8 (kv_stored_batch x kv_heads x kv_stored_rows, a paged pool's tail rows included), one per
// (sequence, KV head) for fp8_e4m3 (batch x kv_heads); 0 for an unquantized one.
int64_t kv_scale_count(const Shape& shape);

// "1024,4096,65536": a ragged batch's lengths as configs, ids and records spell them.
std::string kv_lens_text(const std::vector<int64_t>& kv_lens);

}  // namespace attnbench
