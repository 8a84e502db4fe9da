// Register-tile micro-kernels and a vectorisable exp, shared by the CPU variants that shape their
// tiles for the SIMD units (openmp, chunked). Both compute the same two small products (a row
// group's scores against a slice of Kᵀ, and a row group's weighted sum of V rows) and the same
// softmax steps; what differs between them is only how far apart rows lie and how many keys a tile
// holds, so those come in as arguments and the tiling decisions stay in each variant. The loop
// forms here are the ones GCC 12 vectorises (see the comments below); change them only with a
// timing run at hand. The templates are declared inline too, though they need not be: without the
// hint GCC 12 leaves some kernels as out-of-line calls in openmp's task loop.
#pragma once

#include <cstdint>
#include <type_traits>

namespace attnbench::cpu_kernels {

// kRowBlock x kPanel is the register tile: 6 query rows x 16 floats = 12 of the 16 AVX2 vector
// registers as accumulators (6 of 32 with AVX-512), the rest for the loaded Kᵀ/V vector and the
// broadcast. Each loaded vector then feeds 6 FMAs and the kernels are bound by FMA throughput, not
// loads; 4 x 32 or 8 x 16 spill accumulators to the stack (measured: ~40% slower).
constexpr int kRowBlock = 6;
constexpr int64_t kPanel = 16;

// Per-thread slices are rounded to a cache line, so threads never write to a shared line.
constexpr int64_t kFloatsPerLine = 16;

inline int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Calls kernel(std::integral_constant<int, rows>) for 1 <= rows <= kRowBlock, so that each row
// count of a group gets a kernel with its accumulators fully in registers; the last group of a
// block may be short.
template <typename Kernel>
inline void with_row_count(int64_t rows, Kernel&& kernel) {
  static_assert(kRowBlock == 6, "with_row_count needs one case per row count up to kRowBlock");
  switch (rows) {
    case 6: kernel(std::integral_constant<int, 6>{}); break;
    case 5: kernel(std::integral_constant<int, 5>{}); break;
    case 4: kernel(std::integral_constant<int, 4>{}); break;
    case 3: kernel(std::integral_constant<int, 3>{}); break;
    case 2: kernel(std::integral_constant<int, 2>{}); break;
    default: kernel(std::integral_constant<int, 1>{}); break;
  }
}

// exp(x) for -87 <= x <= 0, to about 1e-7 relative error, in plain arithmetic the compiler
// vectorises (std::exp is a scalar libm call): x = n ln2 + r with |r| <= ln2 / 2, exp(r) by its
// degree-7 Taylor polynomial, 2^n by writing n into the float's exponent bits. Callers clamp x
// at kExpLowest first, in a loop of its own (exp_shifted does both): a clamp inside this function
// lets GCC split the loop body into two branches and give up on vectorising it. exp(-87) is
// 1.6e-38, as good as 0 next to the largest term of a row, 1.
inline float exp_clamped(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2High = 0.693145751953125f;  // ln 2 in two parts: n * kLn2High is exact
  constexpr float kLn2Low = 1.428606765330187045e-6f;
  constexpr float kRoundToInteger = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * kLog2e + kRoundToInteger) - kRoundToInteger;
  const float r = (x - n * kLn2High) - n * kLn2Low;
  float poly = 1.0f / 5040.0f;
  poly = poly * r + 1.0f / 720.0f;
  poly = poly * r + 1.0f / 120.0f;
  poly = poly * r + 1.0f / 24.0f;
  poly = poly * r + 1.0f / 6.0f;
  poly = poly * r + 0.5f;
  poly = poly * r + 1.0f;
  poly = poly * r + 1.0f;
  const int32_t exponent_bits = (static_cast<int32_t>(n) + 127) << 23;
  return poly * __builtin_bit_cast(float, exponent_bits);
}

constexpr float kExpLowest = -87.0f;

// The largest of row[0:count], count >= 1. The ternary, not std::max: GCC 12 does not vectorise
// a simd max-reduction written with std::max.
inline float row_max(const float* row, int64_t count) {
  float largest = row[0];
#pragma omp simd reduction(max : largest)
  for (int64_t j = 0; j < count; ++j) largest = row[j] > largest ? row[j] : largest;
  return largest;
}

// row[j] = exp(row[j] - max) for j < count; returns their sum. The clamp runs as a loop of its
// own, before the exp loop, so that both vectorise (see exp_clamped).
inline float exp_shifted(float* row, int64_t count, float max) {
#pragma omp simd
  for (int64_t j = 0; j < count; ++j) {
    const float shifted = row[j] - max;
    row[j] = shifted > kExpLowest ? shifted : kExpLowest;
  }
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < count; ++j) {
    row[j] = exp_clamped(row[j]);
    sum += row[j];
  }
  return sum;
}

// scores[r][0:kPanel] = scale * q_r . Kᵀ[:, 0:kPanel] for Rows query rows (d_k apart in q);
// the Kᵀ rows are keys_t_stride apart, the score rows scores_stride apart.
template <int Rows>
inline void score_panel(const float* q, int64_t d_k, const float* keys_t, int64_t keys_t_stride,
                        float scale, float* scores, int64_t scores_stride) {
  float acc[Rows][kPanel] = {};
  for (int64_t c = 0; c < d_k; ++c) {
    const float* key_row = keys_t + c * keys_t_stride;
    for (int r = 0; r < Rows; ++r) {
      const float q_rc = q[r * d_k + c];
#pragma omp simd
      for (int64_t j = 0; j < kPanel; ++j) acc[r][j] += q_rc * key_row[j];
    }
  }
  for (int r = 0; r < Rows; ++r) {
#pragma omp simd
    for (int64_t j = 0; j < kPanel; ++j) scores[r * scores_stride + j] = scale * acc[r][j];
  }
}

// A whole tile of Keys scores (a multiple of kPanel) for Rows query rows, panel by panel.
template <int Rows, int64_t Keys>
inline void score_tile(const float* q, int64_t d_k, const float* keys_t, int64_t keys_t_stride,
                       float scale, float* scores, int64_t scores_stride) {
  static_assert(Keys % kPanel == 0, "a score tile is made of whole panels");
  for (int64_t j = 0; j < Keys; j += kPanel) {
    score_panel<Rows>(q, d_k, keys_t + j, keys_t_stride, scale, scores + j, scores_stride);
  }
}

// out[r][0:kPanel] += sum_j weights[r][j] * v[j][0:kPanel] over `keys` keys, for Rows rows.
template <int Rows>
inline void add_weighted_values_panel(const float* weights, int64_t weights_stride, const float* v,
                                      int64_t d_v, int64_t keys, float* out) {
  float acc[Rows][kPanel];
  for (int r = 0; r < Rows; ++r) {
#pragma omp simd
    for (int64_t c = 0; c < kPanel; ++c) acc[r][c] = out[r * d_v + c];
  }
  for (int64_t j = 0; j < keys; ++j) {
    const float* value_row = v + j * d_v;
    for (int r = 0; r < Rows; ++r) {
      const float weight = weights[r * weights_stride + j];
#pragma omp simd
      for (int64_t c = 0; c < kPanel; ++c) acc[r][c] += weight * value_row[c];
    }
  }
  for (int r = 0; r < Rows; ++r) {
#pragma omp simd
    for (int64_t c = 0; c < kPanel; ++c) out[r * d_v + c] = acc[r][c];
  }
}

// The same for the last `width` < kPanel output columns, accumulating in place.
inline void add_weighted_values_tail(int rows, const float* weights, int64_t weights_stride,
                                     const float* v, int64_t d_v, int64_t keys, int64_t width,
                                     float* out) {
  for (int r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < keys; ++j) {
      const float weight = weights[r * weights_stride + j];
      const float* value_row = v + j * d_v;
#pragma omp simd
      for (int64_t c = 0; c < width; ++c) out[r * d_v + c] += weight * value_row[c];
    }
  }
}

// out[r][0:d_v] += sum_j weights[r][j] * v[j][0:d_v] for Rows rows: whole panels, then the tail.
template <int Rows>
inline void add_weighted_values(const float* weights, int64_t weights_stride, const float* v,
                                int64_t d_v, int64_t keys, float* out) {
  int64_t c = 0;
  for (; c + kPanel <= d_v; c += kPanel) {
    add_weighted_values_panel<Rows>(weights, weights_stride, v + c, d_v, keys, out + c);
  }
  if (c < d_v) {
    add_weighted_values_tail(Rows, weights, weights_stride, v + c, d_v, keys, d_v - c, out + c);
  }
}

}  // namespace attnbench::cpu_kernels
