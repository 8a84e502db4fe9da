#include "harness/plan/sweep.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <stdexcept>
#include <unordered_set>

#include "harness/core/checked_math.h"
#include "harness/plan/axes_table.h"
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

// One axis of the product: how many values it has, and how its i-th enters the point.
struct ProductAxis {
  int64_t size;
  std::function<void(AxisPoint&, std::size_t)> apply;
};

// The axes of the product, in the axes table's order (the sweep order; the passes, innermost,
// run side by side). An axis the config leaves out without a default is not in the product:
// its value derives from another's (d_v from d_k, kv_heads from heads).
std::vector<ProductAxis> product_axes(const AxesConfig& axes) {
  std::vector<ProductAxis> product;
  for (const AxisDefinition& axis : axis_definitions()) {
    if (axis.enter == nullptr || !axes.has(axis.key.name)) continue;
    const AxisValues& values = axes.values(axis.key.name);
    product.push_back({static_cast<int64_t>(values.size()),
                       [&values, enter = axis.enter](AxisPoint& point, std::size_t i) {
                         enter(point, values[i]);
                       }});
  }
  return product;
}

// Calls visit(point) for each point of the product, the last axis fastest.
template <class Visit>
void for_each_point(const std::vector<ProductAxis>& product, Visit visit) {
  for (const ProductAxis& axis : product)
    if (axis.size == 0) return;
  std::vector<std::size_t> index(product.size(), 0);
  while (true) {
    AxisPoint point;
    for (std::size_t a = 0; a < product.size(); ++a) product[a].apply(point, index[a]);
    visit(point);
    std::size_t a = product.size();
    for (; a > 0; --a) {
      if (++index[a - 1] < static_cast<std::size_t>(product[a - 1].size)) break;
      index[a - 1] = 0;
    }
    if (a == 0) return;
  }
}

// The shape of one point: what derives from the axes' values, checked as it derives.
Shape shape_of(const AxisPoint& point, int64_t seed) {
  Shape s = point.shape;
  s.d_v = point.d_v.value_or(s.d_k);
  if (point.tokens) {
    s.batch = *point.tokens / s.seq_q;
    if (*point.tokens % s.seq_q != 0) {
      throw ConfigError(
          fmt::format("axes.tokens: {} is not a multiple of seq_q {}", *point.tokens, s.seq_q));
    }
  }
  if (point.model_dim) {
    s.heads = *point.model_dim / s.d_k;
    if (*point.model_dim % s.d_k != 0) {
      throw ConfigError(
          fmt::format("axes.model_dim: {} is not a multiple of d_k {}", *point.model_dim, s.d_k));
    }
  }
  s.kv_heads = point.kv_heads.value_or(s.heads);
  // A ragged batch: batch is its count, seq_kv its longest.
  if (!point.kv_lengths.empty()) {
    s.kv_lens = point.kv_lengths;
    s.batch = static_cast<int64_t>(point.kv_lengths.size());
    s.seq_kv = *std::max_element(point.kv_lengths.begin(), point.kv_lengths.end());
  }
  // After the ragged batch has set seq_kv: documents are drawn only where seq_q == seq_kv.
  s.set_mask(mask_for(point.mask, s.seq_q, s.seq_kv, seed));
  if (const std::string problem = validate(s); !problem.empty())
    throw ConfigError(fmt::format("axes: impossible shape {}: {}", describe(s), problem));
  return s;
}

// Refuses a sweep of more shapes, or cases, than a plan may hold: counted before anything is
// built, since a few long axes multiply into more shapes than memory.
int64_t checked_shape_count(const std::vector<ProductAxis>& product, int64_t variant_count) {
  std::vector<int64_t> sizes;
  for (const ProductAxis& axis : product) sizes.push_back(axis.size);
  const std::optional<int64_t> shape_count = checked_product(sizes.begin(), sizes.end());
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
  return *shape_count;
}

std::vector<Shape> expand_shapes(const AxesConfig& axes, int64_t seed, int64_t variant_count) {
  const std::vector<ProductAxis> product = product_axes(axes);
  std::vector<Shape> shapes;
  shapes.reserve(static_cast<std::size_t>(checked_shape_count(product, variant_count)));
  for_each_point(product, [&](const AxisPoint& point) { shapes.push_back(shape_of(point, seed)); });
  return shapes;
}

}  // namespace

std::vector<Case> expand_cases(const SweepConfig& config,
                               const std::vector<std::string>& variants) {
  const std::vector<Shape> shapes =
      expand_shapes(config.axes, config.measure.seed, static_cast<int64_t>(variants.size()));
  std::vector<Case> cases;
  for (const std::string& variant : variants) {
    for (std::size_t s = 0; s < shapes.size(); ++s) {
      const Shape& shape = shapes[s];
      Case c;
      c.index = static_cast<int64_t>(cases.size());
      c.shape_index = static_cast<int64_t>(s);
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

Shard parse_shard_option(const std::string& text) {
  const Shard shard = parse_shard(text);
  // Typed as it is printed: "-0/2" or "01/2" ran shard 0 or 1 of 2, but a resume compares the
  // manifest's text (refusing "0/2") while merge compares the numbers.
  if (fmt::format("{}/{}", shard.index, shard.count) != text) {
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

namespace {

// The cases' indices for a message: "0 to 9" where they run without a gap, else the first few
// ("0, 2, 4, ..." for a shard's).
std::string index_list(const std::vector<Case>& cases) {
  const int64_t first = cases.front().index, last = cases.back().index;
  if (last - first + 1 == static_cast<int64_t>(cases.size()))
    return fmt::format("{} to {}", first, last);
  constexpr std::size_t kShown = 8;
  std::vector<int64_t> shown;
  for (std::size_t i = 0; i < std::min(kShown, cases.size()); ++i) shown.push_back(cases[i].index);
  return fmt::format("{}{}", fmt::join(shown, ", "), cases.size() > kShown ? ", ..." : "");
}

}  // namespace

std::vector<Case> select_cases(const std::vector<Case>& planned,
                               const std::vector<int64_t>& indices) {
  for (const int64_t index : indices) {
    const bool found = std::any_of(planned.begin(), planned.end(),
                                   [&](const Case& c) { return c.index == index; });
    if (!found) {
      throw ConfigError(fmt::format(
          "--cases: no case {} in this plan{} (see `attnbench plan` for the indices)", index,
          planned.empty() ? "" : fmt::format(" (its indices: {})", index_list(planned))));
    }
  }
  std::vector<Case> selected;
  for (const Case& c : planned) {
    if (std::find(indices.begin(), indices.end(), c.index) != indices.end()) selected.push_back(c);
  }
  return selected;
}

}  // namespace attnbench
