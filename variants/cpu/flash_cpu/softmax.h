// flash_cpu's work on one score tile between the two products, written once against a SIMD path:
// the score modifiers (soft-capping, ALiBi), the mask of a tile a mask edge cuts through, and the
// online softmax (running max and sum, the accumulator's rescale factor). One exp2 per visible
// score: 11 vector operations against the (d_k + d_v) FMAs the score costs in the products.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "variants/cpu/flash_cpu/forward_blocks.h"

namespace attnbench::flash_cpu {

// The keys of one key block each query column sees: [lo[i], hi[i]), counted from the block's
// first key (0 .. keys for every column of a fully visible block). Both ends never decrease with
// i (mask.h), so columns i .. i + n - 1 together see keys lo[i] .. hi[i + n - 1]: the sub-tile
// skipping, the softmax and the P V kernel all take their bounds that way. Padding columns past
// the block's last row repeat its range.
struct TileKeys {
  int32_t lo[kQueryBlock];
  int32_t hi[kQueryBlock];

  // Whether any of columns [first_column, end_column) sees any of keys [first_key, end_key).
  bool sees_any(int64_t first_column, int64_t end_column, int64_t first_key,
                int64_t end_key) const {
    return lo[first_column] < end_key && hi[end_column - 1] > first_key;
  }
};

// 0, 1, ..., kQueryBlock - 1 as floats: a vector of query offsets for the ALiBi distances.
struct ColumnIndex {
  float value[kQueryBlock];
  constexpr ColumnIndex() : value() {
    for (int64_t i = 0; i < kQueryBlock; ++i) value[i] = static_cast<float>(i);
  }
};
alignas(64) inline constexpr ColumnIndex kColumnIndex;

// Online softmax over one key block for `columns` queries (a whole number of vectors): the new
// running max, alpha = exp2(old max - new max) for the accumulator, scores -> exp2(score - max)
// in place, and the running sums. The block max comes from the score kernel, or is recomputed
// here when masking or a modifier changed the scores after it (`recompute_max`). Only the keys a
// vector's columns see (`tile`) are exponentiated; the rest become 0. P (and the sums with it) is
// scaled by 2^-headroom_log2 (output_overflow.h) after its exponential, where that is not 0: a
// multiply by a power of two is exact, where subtracting it from the max first rounds it away
// once |max| passes 2^30.
template <class Ops>
void softmax_block(int64_t keys, int64_t columns, bool recompute_max, float headroom_log2,
                   const TileKeys& tile, const Scratch& scratch) {
  using V = typename Ops::V;
  constexpr int kWidth = Ops::kWidth;
  for (int64_t i = 0; i < columns; i += kWidth) {
    const int64_t first = tile.lo[i];
    const int64_t last = std::max(first, static_cast<int64_t>(tile.hi[i + kWidth - 1]));
    V block_max = Ops::load(scratch.block_max + i);
    if (recompute_max) {
      const float* column = scratch.scores + i;
      block_max = Ops::broadcast(-std::numeric_limits<float>::infinity());
      for (int64_t j = first; j < last; ++j)
        block_max = Ops::max(block_max, Ops::load(column + j * kQueryBlock));
    }
    const V old_max = Ops::load(scratch.row_max + i);
    const V new_max = Ops::max(old_max, block_max);
    // A query that has seen only masked keys keeps max -inf; subtracting 0 instead keeps its
    // exp2(-inf) = 0 from turning into exp2(-inf + inf) = NaN.
    const V shift = Ops::zero_if_minus_infinity(new_max);
    const V alpha = Ops::exp2(Ops::sub(old_max, shift));
    const bool scaled = headroom_log2 != 0;
    const V factor = Ops::broadcast(std::ldexp(1.0f, -static_cast<int>(headroom_log2)));
    V sum = Ops::zero();
    for (int64_t j = 0; j < first; ++j)
      Ops::store(scratch.scores + j * kQueryBlock + i, Ops::zero());
    for (int64_t j = first; j < last; ++j) {
      float* score = scratch.scores + j * kQueryBlock + i;
      V probability = Ops::exp2(Ops::sub(Ops::load(score), shift));
      if (scaled) probability = Ops::mul(probability, factor);
      Ops::store(score, probability);
      sum = Ops::add(sum, probability);
    }
    for (int64_t j = last; j < keys; ++j)
      Ops::store(scratch.scores + j * kQueryBlock + i, Ops::zero());
    Ops::store(scratch.row_max + i, new_max);
    Ops::store(scratch.row_sum + i, Ops::fmadd(Ops::load(scratch.row_sum + i), alpha, sum));
    Ops::store(scratch.alpha + i, alpha);
  }
}

// tanh(x) to about 1e-7 absolute: where |x| < 1.5, an odd rational from Lambert's continued
// fraction (error under 2e-8 there); beyond, 1 - 2 / (1 + e^(2x)), which no longer cancels there.
// x is clamped to +-9, past which tanh rounds to +-1 in fp32 (and e^(2x) stays in exp2's range).
template <class Ops>
inline __attribute__((always_inline)) typename Ops::V tanh_of(typename Ops::V x) {
  using V = typename Ops::V;
  x = Ops::min(Ops::max(x, Ops::broadcast(-9.0f)), Ops::broadcast(9.0f));
  const V x2 = Ops::mul(x, x);
  V numerator = Ops::add(x2, Ops::broadcast(378.0f));
  numerator = Ops::fmadd(numerator, x2, Ops::broadcast(17325.0f));
  numerator = Ops::mul(x, Ops::fmadd(numerator, x2, Ops::broadcast(135135.0f)));
  V denominator = Ops::fmadd(Ops::broadcast(28.0f), x2, Ops::broadcast(3150.0f));
  denominator = Ops::fmadd(denominator, x2, Ops::broadcast(62370.0f));
  denominator = Ops::fmadd(denominator, x2, Ops::broadcast(135135.0f));
  const V rational = Ops::div(numerator, denominator);
  const V growth = Ops::exp2(Ops::mul(x, Ops::broadcast(2.0f * kLog2e)));
  const V one = Ops::broadcast(1.0f);
  const V saturating = Ops::sub(one, Ops::div(Ops::broadcast(2.0f), Ops::add(one, growth)));
  return Ops::select_less(Ops::abs(x), Ops::broadcast(1.5f), rational, saturating);
}

// 1 - tanh²(x), the soft-cap's derivative, as 4e / (1 + e)² with e = e^(-2|x|), to about 3e-7
// relative error down to float's smallest normals (|x| to about 43; past 44, 0). Taken as 1 - t²
// from tanh's fp32 value t it cancels where t nears
// +-1: off by a factor 2 at |x| = 8, and 1.2e-7 where it is below 1e-7 from |x| = 9 (where t
// rounds to 1 - 2^-24), so a row whose scores were all capped far past the cap got gradients
// that should have been 0.
template <class Ops>
inline __attribute__((always_inline)) typename Ops::V tanh_slope_of(typename Ops::V x) {
  using V = typename Ops::V;
  const V e = Ops::exp2(Ops::mul(Ops::abs(x), Ops::broadcast(-2.0f * kLog2e)));
  const V one_plus_e = Ops::add(Ops::broadcast(1.0f), e);
  return Ops::div(Ops::mul(Ops::broadcast(4.0f), e), Ops::mul(one_plus_e, one_plus_e));
}

// The score modifiers on a key block's base-2 scores, in mask.h's order: soft-capping
// s -> c tanh(s / c) (in base 2 the cap is c log2(e) too), then the ALiBi bias
// -slope |p(i) - j|. `distance` is p(i) - j for column 0 and key 0 of the block. `capped`, when
// given, keeps 1 - tanh²(s / c) of each capped score (the backward's softcap derivative).
template <class Ops>
void modify_scores(float softcap_log2, float alibi_slope_log2, int64_t distance, int64_t keys,
                   int64_t columns, float* scores, float* capped = nullptr) {
  using V = typename Ops::V;
  const V cap = Ops::broadcast(softcap_log2);
  const V inverse_cap = Ops::broadcast(softcap_log2 > 0 ? 1.0f / softcap_log2 : 0.0f);
  const V slope = Ops::broadcast(alibi_slope_log2);
  for (int64_t j = 0; j < keys; ++j) {
    float* row = scores + j * kQueryBlock;
    const V row_distance = Ops::broadcast(static_cast<float>(distance - j));
    for (int64_t i = 0; i < columns; i += Ops::kWidth) {
      V score = Ops::load(row + i);
      if (softcap_log2 > 0) {
        const V x = Ops::mul(score, inverse_cap);
        if (capped != nullptr) Ops::store(capped + j * kQueryBlock + i, tanh_slope_of<Ops>(x));
        score = Ops::mul(cap, tanh_of<Ops>(x));
      }
      if (alibi_slope_log2 != 0) {
        const V offset = Ops::add(row_distance, Ops::load(kColumnIndex.value + i));
        score = Ops::sub(score, Ops::mul(slope, Ops::abs(offset)));
      }
      Ops::store(row + i, score);
    }
  }
}

// Scores of keys a column does not see -> -inf, over the whole block (sub-tiles the score kernel
// skipped hold stale values, all of them masked). A template over the path only so that each
// path's translation unit keeps its own copy (compiled with its own instruction set).
template <class Ops>
void mask_scores(const TileKeys& tile, int64_t keys, int64_t columns, float* scores) {
  const float minus_infinity = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < keys; ++j) {
    float* row = scores + j * kQueryBlock;
    for (int64_t i = 0; i < columns; ++i)
      row[i] = j < tile.lo[i] || j >= tile.hi[i] ? minus_infinity : row[i];
  }
}

}  // namespace attnbench::flash_cpu
