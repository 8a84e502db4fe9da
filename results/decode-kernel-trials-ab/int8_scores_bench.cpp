// The scores of decode over an int8 K (4 query rows against 512 keys of d 128, one core, in L1/L2)
// computed three ways, to see what integer dot products could buy flash_cpu's int8 decode:
//   fma    today's kernel: each 16 codes widened to fp32 (vpmovsxbd, vcvtdq2ps), 8 FMAs a pair of
//          keys per 16 elements, the 4 x 2 accumulators summed across lanes as one tree;
//   vnni P the query split into P planes of int8 codes (q = s1 c1 + s2 c2 + ..., each plane the
//          rounded remainder of the last, s_{p+1} = s_p / 254), each plane's products exact in
//          int32 (vpdpbusd, K's codes offset by 128 to be unsigned, the offset taken out through
//          the plane's code sum), the planes combined in fp32 before the same lane tree;
//   wssd P the same with P planes of int16 codes (vpdpwssd, K widened to int16 by vpmovsxbw).
// Prints ns per key (all 4 rows) and the largest error of a score against a float64 reference,
// over the scores' RMS; the reference reads the fp32 query, as the oracle does.
//   g++ -O3 -march=native -std=c++17 int8_scores_bench.cpp -o int8_scores_bench
//   ./int8_scores_bench        (needs AVX-512 with VNNI: Zen 4 or 5, Intel Ice Lake and later)
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

constexpr int kDim = 128, kKeys = 512, kRows = 4;
alignas(64) int8_t keys[kKeys * kDim];
alignas(64) float query[kRows * kDim];
alignas(64) int8_t byte_planes[3][kRows * kDim];
float byte_scale[3][kRows];
int byte_code_sum[3][kRows];
alignas(64) int16_t word_planes[2][kRows * kDim];
float word_scale[2][kRows];
alignas(64) float scores[kRows * kKeys];

// The lane sums of acc[g][k] (4 rows x 2 keys) into sum[g][k], as flash_cpu's lane_sums_4x2.
static inline void lane_sums(const __m512 (&acc)[4][2], float (&sum)[4][2]) {
  __m512 x[4];
  for (int g = 0; g < 4; ++g)
    x[g] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[g][0], acc[g][1], 0x44),
                         _mm512_shuffle_f32x4(acc[g][0], acc[g][1], 0xEE));
  const __m512 rows01 =
      _mm512_add_ps(_mm512_shuffle_f32x4(x[0], x[1], 0x88), _mm512_shuffle_f32x4(x[0], x[1], 0xDD));
  const __m512 rows23 =
      _mm512_add_ps(_mm512_shuffle_f32x4(x[2], x[3], 0x88), _mm512_shuffle_f32x4(x[2], x[3], 0xDD));
  const __m512 pairs =
      _mm512_add_ps(_mm512_unpacklo_ps(rows01, rows23), _mm512_unpackhi_ps(rows01, rows23));
  const __m512 sums = _mm512_add_ps(pairs, _mm512_permute_ps(pairs, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m512i order = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 13, 9, 5, 1, 12, 8, 4, 0);
  _mm256_storeu_ps(&sum[0][0], _mm512_castps512_ps256(_mm512_permutexvar_ps(order, sums)));
}

__attribute__((noinline)) void fma_scores() {
  for (int j = 0; j < kKeys; j += 2) {
    __m512 acc[kRows][2];
    for (int g = 0; g < kRows; ++g) acc[g][0] = acc[g][1] = _mm512_setzero_ps();
    for (int c = 0; c < kDim; c += 16) {
      const __m512 k0 = _mm512_cvtepi32_ps(
          _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(keys + j * kDim + c))));
      const __m512 k1 = _mm512_cvtepi32_ps(
          _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(keys + (j + 1) * kDim + c))));
      for (int g = 0; g < kRows; ++g) {
        const __m512 q = _mm512_load_ps(query + g * kDim + c);
        acc[g][0] = _mm512_fmadd_ps(q, k0, acc[g][0]);
        acc[g][1] = _mm512_fmadd_ps(q, k1, acc[g][1]);
      }
    }
    float sum[4][2];
    lane_sums(acc, sum);
    for (int g = 0; g < kRows; ++g) {
      scores[g * kKeys + j] = sum[g][0];
      scores[g * kKeys + j + 1] = sum[g][1];
    }
  }
}

template <int kPlanes>
__attribute__((noinline)) void vnni_scores() {
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int j = 0; j < kKeys; j += 2) {
    __m512i k[2][2];
    for (int u = 0; u < 2; ++u)
      for (int c = 0; c < 2; ++c)
        k[u][c] = _mm512_xor_si512(_mm512_load_si512(keys + (j + u) * kDim + 64 * c), offset);
    __m512 acc[4][2];
    for (int p = 0; p < kPlanes; ++p)
      for (int g = 0; g < kRows; ++g) {
        const __m512i q0 = _mm512_load_si512(byte_planes[p] + g * kDim);
        const __m512i q1 = _mm512_load_si512(byte_planes[p] + g * kDim + 64);
        const __m512 scale = _mm512_set1_ps(byte_scale[p][g]);
        for (int u = 0; u < 2; ++u) {
          __m512i products = _mm512_dpbusd_epi32(_mm512_setzero_si512(), k[u][0], q0);
          products = _mm512_dpbusd_epi32(products, k[u][1], q1);
          const __m512 as_float = _mm512_cvtepi32_ps(products);
          acc[g][u] =
              p == 0 ? _mm512_mul_ps(as_float, scale) : _mm512_fmadd_ps(as_float, scale, acc[g][u]);
        }
      }
    float sum[4][2];
    lane_sums(acc, sum);
    for (int g = 0; g < kRows; ++g) {
      float offset_products = 0;  // sum over planes of s_p 128 sum(c_p)
      for (int p = 0; p < kPlanes; ++p)
        offset_products += byte_scale[p][g] * 128.0f * byte_code_sum[p][g];
      scores[g * kKeys + j] = sum[g][0] - offset_products;
      scores[g * kKeys + j + 1] = sum[g][1] - offset_products;
    }
  }
}

template <int kPlanes>
__attribute__((noinline)) void wssd_scores() {
  for (int j = 0; j < kKeys; j += 2) {
    __m512i k[2][4];
    for (int u = 0; u < 2; ++u)
      for (int c = 0; c < 4; ++c)
        k[u][c] = _mm512_cvtepi8_epi16(
            _mm256_load_si256((const __m256i*)(keys + (j + u) * kDim + 32 * c)));
    __m512 acc[4][2];
    for (int p = 0; p < kPlanes; ++p)
      for (int g = 0; g < kRows; ++g) {
        __m512i products[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
        for (int c = 0; c < 4; ++c) {
          const __m512i q = _mm512_load_si512(word_planes[p] + g * kDim + 32 * c);
          for (int u = 0; u < 2; ++u) products[u] = _mm512_dpwssd_epi32(products[u], k[u][c], q);
        }
        const __m512 scale = _mm512_set1_ps(word_scale[p][g]);
        for (int u = 0; u < 2; ++u) {
          const __m512 as_float = _mm512_cvtepi32_ps(products[u]);
          acc[g][u] =
              p == 0 ? _mm512_mul_ps(as_float, scale) : _mm512_fmadd_ps(as_float, scale, acc[g][u]);
        }
      }
    float sum[4][2];
    lane_sums(acc, sum);
    for (int g = 0; g < kRows; ++g) {
      scores[g * kKeys + j] = sum[g][0];
      scores[g * kKeys + j + 1] = sum[g][1];
    }
  }
}

// q's planes of codes in [-limit, limit]: each the rounded remainder of the ones before it.
template <class Code>
void split_into_planes(const float* q, int planes, int limit, double first_scale, double shrink,
                       Code* codes, int64_t plane_stride, float* scale, int* code_sum) {
  std::vector<double> rest(q, q + kDim);
  double s = first_scale;
  for (int p = 0; p < planes; ++p) {
    int sum = 0;
    for (int c = 0; c < kDim; ++c) {
      const int code = std::clamp(static_cast<int>(std::lrint(rest[c] / s)), -limit, limit);
      codes[p * plane_stride + c] = static_cast<Code>(code);
      sum += code;
      rest[c] -= code * s;
    }
    scale[p * kRows] = static_cast<float>(s);
    if (code_sum != nullptr) code_sum[p * kRows] = sum;
    s /= shrink;
  }
}

int main() {
  std::mt19937 random(1);
  std::normal_distribution<float> normal(0, 1);
  for (auto& code : keys)
    code = static_cast<int8_t>(
        std::clamp(static_cast<int>(std::lrint(normal(random) * 40)), -127, 127));
  for (int g = 0; g < kRows; ++g) {
    double largest = 0;
    for (int c = 0; c < kDim; ++c) {
      query[g * kDim + c] = normal(random) * 0.13f;  // about decode's pre-scaled rows
      largest = std::max(largest, static_cast<double>(std::abs(query[g * kDim + c])));
    }
    split_into_planes(query + g * kDim, 3, 127, largest / 127, 254, byte_planes[0] + g * kDim,
                      kRows * kDim, &byte_scale[0][g], &byte_code_sum[0][g]);
    split_into_planes(query + g * kDim, 2, 32767, largest / 32767, 65534, word_planes[0] + g * kDim,
                      kRows * kDim, &word_scale[0][g], nullptr);
  }
  std::vector<double> reference(kRows * kKeys);
  double square_sum = 0;
  for (int g = 0; g < kRows; ++g)
    for (int j = 0; j < kKeys; ++j) {
      double dot = 0;
      for (int c = 0; c < kDim; ++c)
        dot += static_cast<double>(query[g * kDim + c]) * keys[j * kDim + c];
      reference[g * kKeys + j] = dot;
      square_sum += dot * dot;
    }
  const double rms = std::sqrt(square_sum / (kRows * kKeys));
  const auto ns_per_key = [](void (*scores_of)()) {
    double best = 1e30;
    for (int trial = 0; trial < 300; ++trial) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < 20; ++i) scores_of();
      const std::chrono::duration<double, std::nano> took =
          std::chrono::steady_clock::now() - start;
      best = std::min(best, took.count() / 20 / kKeys);
    }
    return best;
  };
  const auto report = [&](const char* name, void (*scores_of)()) {
    const double ns = ns_per_key(scores_of);
    double worst = 0;
    for (int i = 0; i < kRows * kKeys; ++i)
      worst = std::max(worst, std::abs(scores[i] - reference[i]));
    std::printf("%-7s %5.2f ns per key   largest error / RMS score %.2e\n", name, ns, worst / rms);
  };
  report("fma", fma_scores);
  report("vnni 1", vnni_scores<1>);
  report("vnni 2", vnni_scores<2>);
  report("vnni 3", vnni_scores<3>);
  report("wssd 1", wssd_scores<1>);
  report("wssd 2", wssd_scores<2>);
}
