// The values a sweep config gives its axes, held by axis name: what axes_table.cpp reads and the
// sweep's product walks. Each axis is declared once, as a row of that table; nothing else lists
// them.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "harness/core/dtype.h"
#include "harness/core/kv_cache.h"
#include "harness/core/kv_quant.h"
#include "harness/core/mask.h"
#include "harness/core/pass.h"
#include "harness/core/shape.h"

namespace attnbench {

// Values of one integer axis, in the order they will be run.
using Axis = std::vector<int64_t>;

// One value of an axis, of the type its row reads (a ragged batch's lengths are one value).
using AxisValue = std::variant<int64_t, bool, double, MaskSpec, DType, Layout, KvCacheSpec, KvDType,
                               Pass, std::vector<int64_t>>;
using AxisValues = std::vector<AxisValue>;

// One point of the sweep's product: each axis's value as the config gives it, before the shape
// derives from them (sweep.cpp: batch from tokens, heads from model_dim, d_v from d_k, kv_heads
// from heads, the documents' lengths, a ragged batch's count and longest length). An axis's row
// says how its value enters: most set their field of `shape` directly.
struct AxisPoint {
  Shape shape;
  std::optional<int64_t> kv_heads, d_v, tokens, model_dim;  // absent: derived
  MaskSpec mask;
  std::vector<int64_t> kv_lengths;  // empty: not ragged
};

// The axes of one config: each given axis's values (or its default's), by name, in the order
// the config's reader set them.
class AxesConfig {
 public:
  bool has(const std::string& name) const { return find(name) != nullptr; }

  const AxisValues& values(const std::string& name) const {
    if (const AxisValues* found = find(name)) return *found;
    throw std::logic_error("internal error: no axis '" + name + "' in the config");
  }

  // The values of an axis whose row reads `T` (std::get fails loudly on a wrong T).
  template <class T>
  std::vector<T> values_of(const std::string& name) const {
    std::vector<T> typed;
    for (const AxisValue& value : values(name)) typed.push_back(std::get<T>(value));
    return typed;
  }

  void set(const std::string& name, AxisValues values) {
    for (auto& [axis, held] : axes_) {
      if (axis == name) {
        held = std::move(values);
        return;
      }
    }
    axes_.emplace_back(name, std::move(values));
  }

  template <class T>
  void set_values(const std::string& name, const std::vector<T>& values) {
    AxisValues held;
    for (std::size_t i = 0; i < values.size(); ++i)
      held.emplace_back(std::in_place_type<T>, values[i]);
    set(name, std::move(held));
  }

 private:
  const AxisValues* find(const std::string& name) const {
    for (const auto& [axis, held] : axes_)
      if (axis == name) return &held;
    return nullptr;
  }

  std::vector<std::pair<std::string, AxisValues>> axes_;
};

}  // namespace attnbench
