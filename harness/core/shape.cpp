#include "harness/core/shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "harness/core/checked_math.h"

namespace attnbench {

namespace {
constexpr int64_t max_tensor_elements = 1000000000000000;  // 1e15

std::string validate_mask(const Shape& s) {
  const MaskSpec& mask = s.mask;
  if (s.causal != (mask.kind == MaskKind::causal)) {
    return fmt::format("Shape::causal ({}) disagrees with the mask ({}): set it with set_mask()",
                       s.causal, to_string(mask));
  }
  if (mask.kind == MaskKind::window && mask.length < 0)
    return fmt::format("mask {}: the window length must be 0 or more", to_string(mask));
  if (mask.kind == MaskKind::prefix && (mask.length < 0 || mask.length > s.seq_kv)) {
    return fmt::format("mask {}: the prefix length must be in [0, seq_kv = {}]", to_string(mask),
                       s.seq_kv);
  }
  if (mask.kind == MaskKind::documents) {
    if (s.seq_q != s.seq_kv) {
      return fmt::format("mask {}: packed documents need seq_q == seq_kv (got {} and {})",
                         to_string(mask), s.seq_q, s.seq_kv);
    }
    if (mask.length < 1 || mask.length > s.seq_q) {
      return fmt::format("mask {}: needs 1 to seq ({}) documents", to_string(mask), s.seq_q);
    }
    if (static_cast<int64_t>(mask.doc_lens.size()) != mask.length) {
      return fmt::format("mask {}: {} document lengths given for {} documents", to_string(mask),
                         mask.doc_lens.size(), mask.length);
    }
    // Each length in 1..seq before they are summed, and the sum checked: lengths a user gives
    // (attend --doc-lens, append) could otherwise wrap around to seq.
    int64_t total = 0;
    for (int64_t length : mask.doc_lens) {
      if (length < 1 || length > s.seq_q) {
        return fmt::format("mask {}: a document length is {}, outside 1..seq ({})", to_string(mask),
                           length, s.seq_q);
      }
      const std::optional<int64_t> sum = checked_add(total, length);
      if (!sum || *sum > s.seq_q) {
        return fmt::format("mask {}: the document lengths sum to more than seq {}", to_string(mask),
                           s.seq_q);
      }
      total = *sum;
    }
    if (total != s.seq_q) {
      return fmt::format("mask {}: the document lengths sum to {}, not seq {}", to_string(mask),
                         total, s.seq_q);
    }
  } else if (!mask.doc_lens.empty()) {
    return fmt::format("mask {}: document lengths are only for the documents mask",
                       to_string(mask));
  }
  // A row that sees no key has an undefined softmax: refuse the shape rather than invent an
  // output. Both ends of a row's key range never decrease with the row (mask.h), so the rows
  // without a key are the first few: report them.
  const MaskGeometry geometry = s.mask_geometry();
  int64_t keyless_rows = 0;
  while (keyless_rows < s.seq_q && geometry.keys(keyless_rows).empty()) ++keyless_rows;
  if (keyless_rows > 0) {
    const std::string rows = keyless_rows == 1
                                 ? std::string("query row 0 sees")
                                 : fmt::format("query rows 0 to {} see", keyless_rows - 1);
    return fmt::format(
        "{} no key under the {} mask (aligned to the end, row i sits at key i + seq_kv - seq_q{})",
        rows, to_string(mask),
        s.seq_q > s.seq_kv
            ? fmt::format(": it needs seq_q <= seq_kv, got {} > {}", s.seq_q, s.seq_kv)
            : "");
  }
  return {};
}

// Ragged batches and paged caches: each sequence's length in 1..max_kv_len, one per sequence,
// seq_kv the longest; a page size of at least one token.
std::string validate_serving(const Shape& s) {
  if (s.kv_cache.is_paged() && (s.kv_cache.page_size < 1 || s.kv_cache.page_size > max_kv_len)) {
    return fmt::format("kv_cache {}: the page size must be in 1..{} tokens", to_string(s.kv_cache),
                       max_kv_len);
  }
  if (s.kv_lens.empty()) return {};
  if (static_cast<int64_t>(s.kv_lens.size()) != s.batch) {
    return fmt::format("kv_lens gives {} sequence lengths for batch {}", s.kv_lens.size(), s.batch);
  }
  int64_t longest = 0;
  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t keys = s.keys_of(b);
    if (keys < 1 || keys > max_kv_len) {
      return fmt::format("kv_lens: sequence {} holds {} keys, outside 1..{}", b, keys, max_kv_len);
    }
    longest = std::max(longest, keys);
  }
  if (longest != s.seq_kv)
    return fmt::format("kv_lens: the longest sequence holds {} keys, not seq_kv {}", longest,
                       s.seq_kv);
  return {};
}

// A ragged batch's sequences each align the mask to their own end (validate_mask has checked the
// longest): no shorter one may leave a query row without a key, and packed documents, whose
// lengths cover seq_q = seq_kv tokens, need every sequence to hold all of them.
std::string validate_ragged_mask(const Shape& s) {
  if (s.kv_lens.empty() || s.mask.kind == MaskKind::none) return {};
  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t keys = s.keys_of(b);
    if (keys == s.seq_kv) continue;
    if (s.mask.kind == MaskKind::documents) {
      return fmt::format(
          "kv_lens: sequence {} holds {} keys, not seq_q {}: packed documents need every sequence "
          "to hold seq_q keys",
          b, keys, s.seq_q);
    }
    // Both ends of a row's key range never decrease with the row: row 0 sees the fewest.
    if (s.mask_geometry_of(b).keys(0).empty()) {
      return fmt::format(
          "kv_lens: sequence {} holds {} keys, fewer than seq_q {}: under the {} mask (aligned to "
          "its end) its first query rows see no key",
          b, keys, s.seq_q, to_string(s.mask));
    }
  }
  return {};
}

}  // namespace

std::string validate(const Shape& s) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"batch", s.batch}, {"heads", s.heads},   {"kv_heads", s.kv_heads},
      {"seq_q", s.seq_q}, {"seq_kv", s.seq_kv}, {"d_k", s.d_k},
      {"d_v", s.d_v}};
  for (const auto& [name, value] : sizes) {
    if (value <= 0) return fmt::format("{} must be positive, got {}", name, value);
  }
  if (s.heads % s.kv_heads != 0) {
    return fmt::format("heads ({}) must be a multiple of kv_heads ({})", s.heads, s.kv_heads);
  }
  // Element counts must fit comfortably in int64 byte offsets, for every tensor (checked: a
  // wrapped product would pass any bound).
  const std::pair<const char*, std::optional<int64_t>> tensors[] = {
      {"Q", checked_product({s.batch, s.heads, s.seq_q, s.d_k})},
      {"K", checked_product({s.batch, s.kv_heads, s.seq_kv, s.d_k})},
      {"V", checked_product({s.batch, s.kv_heads, s.seq_kv, s.d_v})},
      {"O", checked_product({s.batch, s.heads, s.seq_q, s.d_v})},
      {"score", checked_product({s.batch, s.heads, s.seq_q, s.seq_kv})}};
  for (const auto& [name, elements] : tensors) {
    if (!elements || *elements > max_tensor_elements) {
      return fmt::format("shape too large: {} elements in {}",
                         elements ? fmt::format("{:.3g}", static_cast<double>(*elements))
                                  : std::string("more than 9.2e18"),
                         name);
    }
  }
  if (const std::string problem = validate_serving(s); !problem.empty()) return problem;
  if (const std::string problem = validate_mask(s); !problem.empty()) return problem;
  if (const std::string problem = validate_ragged_mask(s); !problem.empty()) return problem;
  if (const std::string problem = softcap_problem(s.softcap); !problem.empty())
    return "softcap " + problem;
  return {};
}

std::string softcap_problem(double softcap) {
  if (softcap == 0) return {};
  if (!(softcap >= min_softcap && softcap <= max_softcap)) {
    return fmt::format(
        "must be 0 (off) or between {:.2g} and {:g} (a normal float32 value), got {}", min_softcap,
        max_softcap, softcap);
  }
  return {};
}

std::string kv_lens_text(const std::vector<int64_t>& kv_lens) {
  return fmt::format("{}", fmt::join(kv_lens, ","));
}

std::string kv_dtype_name(const Shape& s) {
  return is_quantized(s.kv_dtype) ? to_string(s.kv_dtype) : to_string(s.dtype);
}

int64_t kv_scale_count(const Shape& s) {
  switch (s.kv_dtype) {
    case KvDType::case_dtype: return 0;
    case KvDType::int8: return s.kv_stored_batch() * s.kv_heads * s.kv_stored_rows();
    case KvDType::fp8_e4m3: return s.batch * s.kv_heads;
  }
  return 0;
}

std::string describe(const Shape& s) {
  std::string text = fmt::format("b{} h{}/{} q{} kv{} dk{} dv{}", s.batch, s.heads, s.kv_heads,
                                 s.seq_q, s.seq_kv, s.d_k, s.d_v);
  if (s.mask.kind != MaskKind::none) text += " " + to_string(s.mask);
  if (s.alibi) text += " alibi";
  if (s.softcap > 0) text += fmt::format(" softcap:{}", s.softcap);
  if (s.dtype != DType::fp32) text += fmt::format(" {}", to_string(s.dtype));
  if (s.layout != Layout::bhsd) text += fmt::format(" {}", to_string(s.layout));
  if (!s.kv_lens.empty()) text += " kv_lens:" + kv_lens_text(s.kv_lens);
  if (s.kv_cache.is_paged()) text += " " + to_string(s.kv_cache);
  if (is_quantized(s.kv_dtype)) text += fmt::format(" kv:{}", to_string(s.kv_dtype));
  if (s.pass != Pass::fwd) text += fmt::format(" {}", to_string(s.pass));
  return text;
}

}  // namespace attnbench
