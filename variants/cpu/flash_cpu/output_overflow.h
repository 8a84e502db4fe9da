// flash_cpu's answer to an O accumulator past float's range. O is a convex combination of V's
// rows, so it fits in float wherever V does, but the online softmax sums p_j V_j with p_j <= 1
// before dividing by the sum of the p_j: past 3.4e38 for V within a factor of the key count of
// float's largest values. A query block (vector path), query group (tiles) or decode pass whose
// accumulator is not finite (rows_finite) is computed again with P times 2^-kOverflowHeadroomLog2
// (the headroom_log2 argument of the forward kernels, DecodeJob::headroom_log2): the sum then stays
// below keys * 2^64, and P's largest term (2^-64) far from float's smallest normal (2^-126), so
// only terms 2^-62 below a row's largest, past fp32's precision, leave the sums. P is scaled after
// its exponential, a multiply by a power of two (exact); the max itself is left alone (max + 64
// rounds to max once |max| passes 2^31).
#pragma once

#include <cstdint>
#include <limits>

namespace attnbench::flash_cpu {

inline constexpr float kOverflowHeadroomLog2 = 64.0f;

// One element of O = accumulator / sum, held within float's range. O is a convex combination of
// V's rows, no larger than float's largest value, but the quotient of the two rounded sums can
// round past it (V at float's largest, the sums a few ulps apart: inf, where naive's normalised
// weights give 3.4e38). NaN stays NaN.
inline float within_float_range(float value) {
  constexpr float kLargest = std::numeric_limits<float>::max();
  return value > kLargest ? kLargest : value < -kLargest ? -kLargest : value;
}

// Whether `columns` floats of each of `rows` rows (`stride` apart) are all finite: x * 0 is 0 for
// a finite x and NaN for inf or NaN, so sums of vectors tell. Four sums, so that the adds do not
// wait on each other: about one vector operation per vector of O, against the (d_k + d_v) FMAs
// per key that made each.
template <class Ops>
bool rows_finite(const float* values, int64_t rows, int64_t columns, int64_t stride) {
  using V = typename Ops::V;
  constexpr int64_t kWidth = Ops::kWidth;
  const int64_t vectors_end = columns / kWidth * kWidth;
  V probes[4] = {Ops::zero(), Ops::zero(), Ops::zero(), Ops::zero()};
  float tail = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = values + r * stride;
    int64_t c = 0;
    for (; c + 4 * kWidth <= vectors_end; c += 4 * kWidth)
      for (int x = 0; x < 4; ++x)
        probes[x] = Ops::add(probes[x], Ops::mul(Ops::load(row + c + x * kWidth), Ops::zero()));
    for (; c < vectors_end; c += kWidth)
      probes[0] = Ops::add(probes[0], Ops::mul(Ops::load(row + c), Ops::zero()));
    for (; c < columns; ++c) tail += row[c] * 0.0f;
  }
  alignas(64) float lanes[kWidth];
  Ops::store(lanes, Ops::add(Ops::add(probes[0], probes[1]), Ops::add(probes[2], probes[3])));
  for (float lane : lanes) tail += lane;
  return tail == 0.0f;
}

}  // namespace attnbench::flash_cpu
