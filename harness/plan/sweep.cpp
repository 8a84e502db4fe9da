#include "harness/plan/sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <unordered_set>

#include "harness/core/checked_math.h"
#include "harness/variant/registry.h"

namespace attnbench {

std::vector<std::string> resolve_variants(const std::vector<std::string>& requested) {
  Registry::instance().check_names();
  const auto registered = Registry::instance().all();
  std::vector<std::string> names;
  auto add = [&names](const std::string& name) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  };
  for (const std::string& request : requested) {
    if (request == "all" || request == "cpu" || request == "cuda") {
      for (const auto& variant : registered) {
        if (request == "all" || request == to_string(variant.info.device)) add(variant.info.name);
      }
    } else if (Registry::instance().find(request) != nullptr) {
      add(request);
    } else {
      throw ConfigError(fmt::format("unknown variant '{}' (known: {}; groups: cpu, cuda, all)",
                                    request, fmt::join(Registry::instance().names(), ", ")));
    }
  }
  return names;
}

namespace {

// The shapes of the sweep, sequence length innermost so each variant's cases grow in cost and
// the budget can predict a case from the ones before it.
// The mask of one shape. A "documents:K" spec gets K lengths drawn from the sweep's seed and the
// sequence length, not from the case index: every variant, dtype and layout of a run then reads
// the same documents, so their times compare like for like. A count the shape cannot hold is left
// without lengths for validate() to refuse.
MaskSpec mask_for(const MaskSpec& spec, int64_t seq_q, int64_t seq_kv, int64_t seed) {
  if (spec.kind != MaskKind::documents || seq_q != seq_kv || spec.length < 1 ||
      spec.length > seq_q) {
    return spec;
  }
  const uint64_t documents_seed = static_cast<uint64_t>(seed) * 1000003u +
                                  static_cast<uint64_t>(seq_q) * 1009u +
                                  static_cast<uint64_t>(spec.length);
  return MaskSpec::documents(draw_document_lengths(seq_q, spec.length, documents_seed));
}

// The serving variants of one shape: each ragged batch of kv_lens (batch = its count, seq_kv =
// its longest; the shape itself when there is none), each with each kv_cache layout and each
// kv_dtype.
std::vector<Shape> serving_shapes(const Shape& shape, const AxesConfig& axes) {
  std::vector<Shape> shapes;
  const std::vector<std::vector<int64_t>> no_lengths{{}};
  for (const std::vector<int64_t>& lengths : axes.kv_lens.empty() ? no_lengths : axes.kv_lens)
    for (const KvCacheSpec& kv_cache : axes.kv_cache)
      for (const KvDType kv_dtype : axes.kv_dtype) {
        Shape s = shape;
        s.kv_cache = kv_cache;
        s.kv_dtype = kv_dtype;
        if (!lengths.empty()) {
          s.kv_lens = lengths;
          s.batch = static_cast<int64_t>(lengths.size());
          s.seq_kv = *std::max_element(lengths.begin(), lengths.end());
        }
        shapes.push_back(std::move(s));
      }
  return shapes;
}

std::vector<Shape> expand_shapes(const AxesConfig& axes, int64_t seed, int64_t variant_count) {
  const Axis lockstep_one{0};  // a placeholder axis with one value, for absent constraints
  const Axis& tokens_axis = axes.tokens ? *axes.tokens : lockstep_one;
  const Axis& model_dim_axis = axes.model_dim ? *axes.model_dim : lockstep_one;
  const Axis& batch_axis = axes.tokens ? lockstep_one : axes.batch;
  const Axis& heads_axis = axes.model_dim ? lockstep_one : axes.heads;
  // Counted before anything is built: a few long axes multiply into more shapes than memory.
  auto length = [](const auto& axis) { return axis ? static_cast<int64_t>(axis->size()) : 1; };
  const std::optional<int64_t> shape_count = checked_product(
      {static_cast<int64_t>(tokens_axis.size()), static_cast<int64_t>(batch_axis.size()),
       static_cast<int64_t>(model_dim_axis.size()), static_cast<int64_t>(heads_axis.size()),
       static_cast<int64_t>(axes.d_k.size()), length(axes.d_v),
       static_cast<int64_t>(axes.mask.size()), static_cast<int64_t>(axes.alibi.size()),
       static_cast<int64_t>(axes.softcap.size()), static_cast<int64_t>(axes.dtype.size()),
       static_cast<int64_t>(axes.layout.size()), static_cast<int64_t>(axes.pass.size()),
       length(axes.kv_heads), static_cast<int64_t>(std::max<std::size_t>(axes.kv_lens.size(), 1)),
       static_cast<int64_t>(axes.kv_cache.size()), static_cast<int64_t>(axes.kv_dtype.size()),
       axes.seq_len ? length(axes.seq_len) : length(axes.seq_q) * length(axes.seq_kv)});
  if (!shape_count || *shape_count > max_sweep_shapes) {
    throw ConfigError(fmt::format("axes: the sweep has {} shapes, more than the {} allowed",
                                  shape_count ? fmt::to_string(*shape_count) : "too many",
                                  max_sweep_shapes));
  }
  // Each variant repeats every shape: the cases, not the shapes, are what a plan holds in memory
  // and writes out (two million cases had taken 10 GB).
  if (const auto case_count = checked_product({*shape_count, std::max<int64_t>(variant_count, 1)});
      !case_count || *case_count > max_sweep_cases) {
    throw ConfigError(
        fmt::format("the sweep has {} cases ({} shapes x {} variants), more than the {} allowed",
                    case_count ? fmt::to_string(*case_count) : "too many", *shape_count,
                    variant_count, max_sweep_cases));
  }
  std::vector<std::pair<int64_t, int64_t>> seq_pairs;
  if (axes.seq_len) {
    for (int64_t n : *axes.seq_len) seq_pairs.emplace_back(n, n);
  } else {
    // With kv_lens, seq_kv comes from each batch's lengths (serving_shapes); 0 holds its place.
    for (int64_t q : *axes.seq_q)
      for (int64_t kv : axes.seq_kv ? *axes.seq_kv : Axis{0}) seq_pairs.emplace_back(q, kv);
  }

  std::vector<Shape> shapes;
  for (int64_t tokens : tokens_axis)
    for (int64_t batch : batch_axis)
      for (int64_t model_dim : model_dim_axis)
        for (int64_t heads_given : heads_axis)
          for (int64_t d_k : axes.d_k)
            for (int64_t d_v : axes.d_v ? *axes.d_v : Axis{d_k})
              for (DType dtype : axes.dtype)
                for (Layout layout : axes.layout)
                  for (const MaskSpec& mask : axes.mask)
                    for (bool alibi : axes.alibi)
                      for (double softcap : axes.softcap)
                        for (auto [seq_q, seq_kv] : seq_pairs) {
                          Shape s;
                          s.dtype = dtype;
                          s.layout = layout;
                          s.d_k = d_k;
                          s.d_v = d_v;
                          s.set_mask(mask_for(mask, seq_q, seq_kv, seed));
                          s.alibi = alibi;
                          s.softcap = softcap;
                          s.seq_q = seq_q;
                          s.seq_kv = seq_kv;
                          s.batch = axes.tokens ? tokens / seq_q : batch;
                          if (axes.tokens && tokens % seq_q != 0) {
                            throw ConfigError(fmt::format(
                                "axes.tokens: {} is not a multiple of seq_q {}", tokens, seq_q));
                          }
                          s.heads = axes.model_dim ? model_dim / d_k : heads_given;
                          if (axes.model_dim && model_dim % d_k != 0) {
                            throw ConfigError(fmt::format(
                                "axes.model_dim: {} is not a multiple of d_k {}", model_dim, d_k));
                          }
                          for (int64_t kv_heads : axes.kv_heads ? *axes.kv_heads : Axis{s.heads}) {
                            s.kv_heads = kv_heads;
                            for (Shape serving : serving_shapes(s, axes)) {
                              if (const std::string problem = validate(serving); !problem.empty()) {
                                throw ConfigError(fmt::format("axes: impossible shape {}: {}",
                                                              describe(serving), problem));
                              }
                              // The passes of one shape run side by side: fwd, bwd, fwd_bwd.
                              for (Pass pass : axes.pass) {
                                serving.pass = pass;
                                shapes.push_back(serving);
                              }
                            }
                          }
                        }
  return shapes;
}

}  // namespace

std::vector<Case> expand_cases(const SweepConfig& config,
                               const std::vector<std::string>& variants) {
  const std::vector<Shape> shapes =
      expand_shapes(config.axes, config.measure.seed, static_cast<int64_t>(variants.size()));
  std::vector<Case> cases;
  for (const std::string& variant : variants) {
    for (const Shape& shape : shapes) {
      Case c;
      c.index = static_cast<int64_t>(cases.size());
      c.variant = variant;
      c.shape = shape;
      c.id = case_id(variant, shape);
      cases.push_back(std::move(c));
    }
  }
  // Resume, merge and the end-of-run rewrite match records by case id: two cases sharing one
  // would lose a record. The config refuses repeated axis values and the id spells every field
  // of the shape, so a repeat here is a bug in this file or in case_id(), never bad input.
  std::unordered_set<std::string> ids;
  for (const Case& c : cases) {
    if (!ids.insert(c.id).second) {
      throw std::logic_error(
          fmt::format("internal error: two cases of the sweep share the id {}", c.id));
    }
  }
  return cases;
}

Shard parse_shard(const std::string& text) {
  // from_chars, not sscanf: a number too large for int64 is an error, not undefined behaviour.
  Shard shard;
  const char* const end = text.data() + text.size();
  const auto [slash, index_error] = std::from_chars(text.data(), end, shard.index);
  bool well_formed = index_error == std::errc() && slash != end && *slash == '/';
  if (well_formed) {
    const auto [count_end, count_error] = std::from_chars(slash + 1, end, shard.count);
    well_formed = count_error == std::errc() && count_end == end;
  }
  if (!well_formed || shard.count < 1 || shard.index < 0 || shard.index >= shard.count) {
    throw ConfigError(fmt::format("--shard '{}': expected I/N with 0 <= I < N, e.g. 0/4", text));
  }
  return shard;
}

std::vector<Case> select_shard(const std::vector<Case>& cases, const Shard& shard) {
  std::vector<Case> selected;
  for (const Case& c : cases) {
    if (c.index % shard.count == shard.index) selected.push_back(c);
  }
  return selected;
}

std::vector<Case> select_cases(const std::vector<Case>& planned,
                               const std::vector<int64_t>& indices) {
  for (const int64_t index : indices) {
    const bool found = std::any_of(planned.begin(), planned.end(),
                                   [&](const Case& c) { return c.index == index; });
    if (!found) {
      throw ConfigError(fmt::format(
          "--cases: no case {} in this plan{} (see `attnbench plan` for the indices)", index,
          planned.empty() ? ""
                          : fmt::format(" (its indices: {} to {})", planned.front().index,
                                        planned.back().index)));
    }
  }
  std::vector<Case> selected;
  for (const Case& c : planned) {
    if (std::find(indices.begin(), indices.end(), c.index) != indices.end()) selected.push_back(c);
  }
  return selected;
}

}  // namespace attnbench
