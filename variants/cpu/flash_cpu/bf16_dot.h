// flash_cpu's bf16 products as vdpbf16ps (AVX512_BF16), for the avx512_bf16 kernels only.
// vdpbf16ps adds, in each fp32 lane, the two products of a pair of bf16 values: the reduction
// dimension is taken two at a time inside a lane. So both products are written over pairs:
// - S = Q Kᵀ reduces over d_k: a lane is a query, holding the pair (q[i][2c], q[i][2c + 1]);
//   a K row's pair (k[j][2c], k[j][2c + 1]) is already adjacent in memory and is broadcast
//   as one 32-bit word. Qᵀ is packed once per query block as q_pairs[c][i].
// - O = P V reduces over the keys: a lane is a column of V, holding (v[2j][c], v[2j + 1][c]),
//   packed once per key block as v_pairs[j][c]; P is rounded to bf16 into p_pairs[j][i] =
//   (p[2j][i], p[2j + 1][i]) and broadcast per query. Rounding P to bf16 before P V is what
//   FlashAttention does on the GPU; the row sums stay those of the fp32 P.
// Accumulation is fp32 throughout; an odd key count is padded with a zero key. It pays off only
// where vdpbf16ps outpaces the FMA units (twice their rate on Zen 4, half on the Intel hosts
// measured here): flash_cpu.cpp decides by measuring both.
#pragma once

// Or, for tests on CPUs without AVX-512, every instruction emulated (avx512_emulation.h, included
// first by kernels_avx512_bf16_emulated.cpp).
#if (!defined(__AVX512F__) || !defined(__AVX512VL__) || !defined(__AVX512BW__) || \
     !defined(__AVX512BF16__)) &&                                                 \
    !defined(ATTNBENCH_AVX512_EMULATED)
#error "bf16_dot.h needs -mavx512f -mavx512vl -mavx512bw -mavx512bf16"
#endif

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "harness/simd/avx512.h"
#include "variants/cpu/flash_cpu/decode_micro_kernels.h"
#include "variants/cpu/flash_cpu/micro_kernels.h"
#include "variants/cpu/flash_cpu/tile_dispatch.h"

namespace attnbench::flash_cpu {

// The AVX-512 operations under a name of their own, so that the templates these kernels
// instantiate are not the same symbols as the plain avx512 kernels' (compiled without BF16).
struct Avx512WithBf16 : simd::Avx512 {};

// The products over `DotOps`, the AVX-512 operations under the name of the path's object
// (Avx512WithBf16 here, its emulated twin's own there), for the same reason.
template <class DotOps>
struct Bf16DotOn {
  static constexpr bool kEnabled = true;
  using Ops = DotOps;
  using V = typename Ops::V;
  using Pairs = uint32_t;  // two bf16 values; the lower index in the low half
  static constexpr int kWidth = Ops::kWidth;
  static constexpr int kVectors = TileShape<Ops>::kVectors;

  // The 16-bit elements of the two halves of `both` interleaved: lane k of the result holds
  // (both[k], both[16 + k]).
  static __m512i interleave_halves(__m512i both) {
    const __m512i order =
        _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(order, both);
  }

  // scores[r][i] = scale_log2 * sum_c k[r][c] q[i][c] for kRows keys and one strip of queries.
  template <int kRows>
  static void score_tile(const Pairs* k, int64_t k_stride, int64_t pairs, const Pairs* q,
                         float scale_log2, float* scores, float* block_max) {
    V acc[kRows][kVectors];
    zero_tile(acc, Ops::zero());
    for (int64_t c = 0; c < pairs; ++c) {
      __m512bh query[kVectors];
#pragma GCC unroll 4
      for (int x = 0; x < kVectors; ++x)
        query[x] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(q + c * kQueryBlock + x * kWidth));
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) {
        const __m512bh key =
            reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(k[r * k_stride + c])));
#pragma GCC unroll 4
        for (int x = 0; x < kVectors; ++x) acc[r][x] = _mm512_dpbf16_ps(acc[r][x], key, query[x]);
      }
    }
    const V scale = Ops::broadcast(scale_log2);
#pragma GCC unroll 4
    for (int x = 0; x < kVectors; ++x) {
      V tile_max = Ops::load(block_max + x * kWidth);
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) {
        acc[r][x] = Ops::mul(acc[r][x], scale);
        Ops::store(scores + r * kQueryBlock + x * kWidth, acc[r][x]);
        tile_max = Ops::max(tile_max, acc[r][x]);
      }
      Ops::store(block_max + x * kWidth, tile_max);
    }
  }

  // score_tile for a run-time row count (1 .. the tile's).
  static void score_rows(int rows, const Pairs* k, int64_t k_stride, int64_t pairs, const Pairs* q,
                         float scale_log2, float* scores, float* block_max) {
    dispatch_count<TileShape<Ops>::kRows>(rows, [&](auto row_count) {
      score_tile<decltype(row_count)::value>(k, k_stride, pairs, q, scale_log2, scores, block_max);
    });
  }

  // out[i][c] = alpha[i] out[i][c] + sum_j p[j][i] v[j][c] over key pairs, for kRows queries and
  // kColumnVectors vectors of columns.
  template <int kRows, int kColumnVectors>
  static void output_tile(const Pairs* p, int64_t key_pairs, const Pairs* v, int64_t v_stride,
                          const float* alpha, float* out, int64_t out_stride) {
    V acc[kRows][kColumnVectors];
    zero_tile(acc, Ops::zero());
    for (int64_t j = 0; j < key_pairs; ++j) {
      __m512bh value[kColumnVectors];
#pragma GCC unroll 4
      for (int x = 0; x < kColumnVectors; ++x)
        value[x] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(v + j * v_stride + x * kWidth));
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) {
        const __m512bh weight =
            reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(p[j * kQueryBlock + r])));
#pragma GCC unroll 4
        for (int x = 0; x < kColumnVectors; ++x)
          acc[r][x] = _mm512_dpbf16_ps(acc[r][x], weight, value[x]);
      }
    }
    // As in output_tile: alpha O is added last, off the accumulators' critical path.
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const V a = Ops::broadcast(alpha[r]);
#pragma GCC unroll 4
      for (int x = 0; x < kColumnVectors; ++x) {
        float* o = out + r * out_stride + x * kWidth;
        Ops::store(o, Ops::fmadd(a, Ops::load(o), acc[r][x]));
      }
    }
  }

  // output_tile for run-time row and vector counts (1 .. the tile's).
  static void output_rows(int rows, int vectors, const Pairs* p, int64_t key_pairs, const Pairs* v,
                          int64_t v_stride, const float* alpha, float* out, int64_t out_stride) {
    dispatch_tile<TileShape<Ops>::kRows, kVectors>(
        rows, vectors, [&](auto row_count, auto vector_count) {
          output_tile<decltype(row_count)::value, decltype(vector_count)::value>(
              p, key_pairs, v, v_stride, alpha, out, out_stride);
        });
  }

  // The backward's S as score_tile computes the forward's, bit for bit, but query-major (a lane per
  // key): scores[r][j] = scale_log2 * sum_c q[r][c] k[j][c] for kRows query rows and kKeyVectors
  // vectors of keys, from the rows' pairs (q, q_stride pairs apart) and the keys' pairs transposed
  // (k_t[c][j], k_t_stride pairs a row). Each lane runs the forward's chain: the pairs in the same
  // order from zero, each pair's products as vdpbf16ps adds them (the two operands swap roles,
  // and a product does not depend on their order), the scale last. So P = exp2(S - L) meets the
  // forward's L exactly; fp32 products summed another way were a few ulps of |S| apart, which
  // at scores of 1e4 moved dV by 0.3%.
  template <int kRows, int kKeyVectors>
  static void backward_score_tile(const Pairs* q, int64_t q_stride, int64_t pairs, const Pairs* k_t,
                                  int64_t k_t_stride, float scale_log2, float* scores,
                                  int64_t scores_stride) {
    V acc[kRows][kKeyVectors];
    zero_tile(acc, Ops::zero());
    for (int64_t c = 0; c < pairs; ++c) {
      __m512bh keys[kKeyVectors];
#pragma GCC unroll 8
      for (int x = 0; x < kKeyVectors; ++x)
        keys[x] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(k_t + c * k_t_stride + x * kWidth));
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        const __m512bh query =
            reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(q[r * q_stride + c])));
#pragma GCC unroll 8
        for (int x = 0; x < kKeyVectors; ++x)
          acc[r][x] = _mm512_dpbf16_ps(acc[r][x], query, keys[x]);
      }
    }
    const V scale = Ops::broadcast(scale_log2);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 8
      for (int x = 0; x < kKeyVectors; ++x)
        Ops::store(scores + r * scores_stride + x * kWidth, Ops::mul(acc[r][x], scale));
  }

  // backward_score_tile's register tile: 4 rows x 6 vectors (96 keys) is 24 accumulators, the 6
  // key vectors and the broadcast: 31 of 32 zmm.
  static constexpr int kBackwardRows = 4;
  static constexpr int kBackwardKeyVectors = 6;

  // backward_score_tile over `rows` query rows and `key_columns` keys (whole vectors).
  static void backward_scores(int64_t rows, int64_t key_columns, int64_t pairs, const Pairs* q,
                              int64_t q_stride, const Pairs* k_t, int64_t k_t_stride,
                              float scale_log2, float* scores, int64_t scores_stride) {
    const int64_t key_vectors = key_columns / kWidth;
    for (int64_t r = 0; r < rows; r += kBackwardRows)
      for (int64_t x = 0; x < key_vectors; x += kBackwardKeyVectors)
        dispatch_tile<kBackwardRows, kBackwardKeyVectors>(
            static_cast<int>(std::min<int64_t>(kBackwardRows, rows - r)),
            static_cast<int>(std::min<int64_t>(kBackwardKeyVectors, key_vectors - x)),
            [&](auto row_count, auto vector_count) {
              backward_score_tile<decltype(row_count)::value, decltype(vector_count)::value>(
                  q + r * q_stride, q_stride, pairs, k_t + x * kWidth, k_t_stride, scale_log2,
                  scores + r * scores_stride + x * kWidth, scores_stride);
            });
  }

  // q_pairs[c][i] = (q[i][2c], q[i][2c + 1]) for the block's rows; padding columns are zero.
  static void pack_query_pairs(const TensorView& q_view, int64_t batch, int64_t head,
                               int64_t first_query, int64_t rows, int64_t columns, int64_t pairs,
                               Pairs* q_pairs) {
    for (int64_t i = 0; i < rows; ++i) {
      const auto* row = static_cast<const char*>(q_view.address(batch, head, first_query + i));
      for (int64_t c = 0; c < pairs; ++c)
        std::memcpy(&q_pairs[c * kQueryBlock + i], row + c * sizeof(Pairs), sizeof(Pairs));
    }
    for (int64_t c = 0; c < pairs; ++c)
      std::fill(q_pairs + c * kQueryBlock + rows, q_pairs + c * kQueryBlock + columns, 0u);
  }

  // v_pairs[j][c] = (v[2j][c], v[2j + 1][c]) for the key block, columns zero-padded to the
  // vectors the output kernel reads, a missing last key as zeros.
  static void pack_value_pairs(const TensorView& v_view, int64_t batch, int64_t kv_head,
                               int64_t first_key, int64_t keys, int64_t d_v, int64_t dv_stride,
                               Pairs* v_pairs) {
    for (int64_t j = 0; j < keys; j += 2) {
      const auto* even =
          static_cast<const uint16_t*>(v_view.address(batch, kv_head, first_key + j));
      const auto* odd =
          j + 1 < keys
              ? static_cast<const uint16_t*>(v_view.address(batch, kv_head, first_key + j + 1))
              : nullptr;
      for (int64_t c = 0; c < dv_stride; c += kWidth) {
        const int64_t valid = std::clamp<int64_t>(d_v - c, 0, kWidth);
        const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
        const __m256i a = _mm256_maskz_loadu_epi16(mask, even + c);
        const __m256i b =
            odd != nullptr ? _mm256_maskz_loadu_epi16(mask, odd + c) : _mm256_setzero_si256();
        // Zero-masked inserts only: GCC 12's unmasked ones start from an "undefined" vector and
        // trip -Wmaybe-uninitialized inside its own header (GCC bug 105593).
        const __m512i low = _mm512_maskz_inserti64x4(0xFF, _mm512_setzero_si512(), a, 0);
        const __m512i both = _mm512_maskz_inserti64x4(0xFF, low, b, 1);
        _mm512_storeu_si512(v_pairs + (j / 2) * dv_stride + c, interleave_halves(both));
      }
    }
  }

  // The block's probabilities (fp32, key-major) rounded to bf16 pairs of keys, in place: row j of
  // the result is written over score row j after rows 2j and 2j + 1 were read (j <= 2j).
  static void pack_probability_pairs(float* scores, int64_t keys, int64_t columns) {
    auto* pairs = reinterpret_cast<Pairs*>(scores);
    for (int64_t j = 0; j < keys; j += 2) {
      for (int64_t i = 0; i < columns; i += kWidth) {
        const __m512 even = _mm512_loadu_ps(scores + j * kQueryBlock + i);
        const __m512 odd = j + 1 < keys ? _mm512_loadu_ps(scores + (j + 1) * kQueryBlock + i)
                                        : _mm512_setzero_ps();
        // Rounded to nearest even: [even[0..15], odd[0..15]], then interleaved into pairs.
        const __m512i both = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(odd, even));
        _mm512_storeu_si512(pairs + (j / 2) * kQueryBlock + i, interleave_halves(both));
      }
    }
  }

  // Decode's scores for a group of four rows (kDecodeGroup; decode_piece.h takes these products
  // only where every group has four) of bf16 queries over a bf16 cache
  // (decode_scores' job, whose loads widen each K vector and multiply 16 fp32 lanes per FMA):
  // scores[g * kDecodeTile + j] = scale_log2 * q[g] . k[j], with q's and k's rows taken as stored,
  // d_k's pairs adjacent in both, so one vdpbf16ps takes 32 elements of d_k and nothing is
  // widened. The products of bf16 values are exact in fp32, as the widened ones were; q is scaled
  // after the sum instead of before it. Two keys at a time, as decode_scores; d_k a multiple of 32
  // (kDecodeDotElements); `next`'s K rows asked for on the way, a line per 32 elements (the rows,
  // 64-byte multiples, start on lines in the harness's buffers; a caller's view that does not
  // loses a line of each row's requests, speed only).
  static void decode_scores(const uint16_t* q, int64_t q_stride, int64_t d_k, const uint16_t* k,
                            int64_t k_stride, int64_t keys, float scale_log2, float* scores,
                            const NextRows<Ops, uint16_t>& next) {
    static_assert(kDecodeGroup == 4, "lane_sums_4x2 reduces four rows");
    constexpr int kRows = kDecodeGroup;
    const auto load = [](const uint16_t* p) {
      return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p));
    };
    for (int64_t j = 0; j < keys; j += 2) {
      // An odd last key pairs with itself; its second score is not stored.
      const uint16_t* k0 = k + j * k_stride;
      const uint16_t* k1 = j + 1 < keys ? k0 + k_stride : k0;
      __m512 acc[kRows][2];
#pragma GCC unroll 4
      for (int g = 0; g < kRows; ++g) acc[g][0] = acc[g][1] = Ops::zero();
      for (int64_t c = 0; c < d_k; c += kDecodeDotElements) {
        next.fetch(j, c);
        next.fetch(j + 1, c);
        __m512bh key0 = load(k0 + c), key1 = load(k1 + c);
        hold_in_register(key0);
        hold_in_register(key1);
#pragma GCC unroll 4
        for (int g = 0; g < kRows; ++g) {
          __m512bh query = load(q + g * q_stride + c);
          hold_in_register(query);
          acc[g][0] = _mm512_dpbf16_ps(acc[g][0], query, key0);
          acc[g][1] = _mm512_dpbf16_ps(acc[g][1], query, key1);
        }
      }
      float sums[kRows][2];
      lane_sums_4x2<Ops>(acc, sums);
#pragma GCC unroll 4
      for (int g = 0; g < kRows; ++g) {
        scores[g * kDecodeTile + j] = sums[g][0] * scale_log2;
        if (j + 1 < keys) scores[g * kDecodeTile + j + 1] = sums[g][1] * scale_log2;
      }
    }
  }
};

using Bf16Dot = Bf16DotOn<Avx512WithBf16>;

}  // namespace attnbench::flash_cpu
