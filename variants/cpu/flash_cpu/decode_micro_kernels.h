// flash_cpu's decode micro-kernels, written once against a SIMD path: a tile's scores for a group
// of up to kDecodeGroup query rows (dot products along d_k, K widened on load), the online
// softmax of one row over the tile, and the output update O = alpha O + P V of a row group.
// Decode has few query rows, so vectors run along d rather than along the queries: each K or V
// vector loaded (widened from bf16/fp16 in registers, never packed to memory) feeds every row of
// the group. Cost per key: (d_k + d_v) x rows FMAs, one lane sum per score, 1 exp2 per score.
// While they read a tile's K or V rows, the scores and the output update ask for those of a tile
// further on (NextRows): one prefetch per cache line, spread through their loops over d.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "harness/core/dtype.h"
#include "harness/core/element_types.h"
#include "harness/core/kv_quant.h"
#include "variants/cpu/flash_cpu/decode_plan.h"
#include "variants/cpu/flash_cpu/softmax.h"

namespace attnbench::flash_cpu {

constexpr int kDecodeGroup = 4;  // query rows sharing each loaded K/V vector

// How K and V elements of one dtype reach the FMAs: a vector widened on load, or one element.
template <class Ops, DType kType>
struct KvElement;
template <class Ops>
struct KvElement<Ops, DType::fp32> {
  using Storage = float;
  static typename Ops::V load(const float* p) { return Ops::load(p); }
  static float scalar(const float* p) { return *p; }
};
template <class Ops>
struct KvElement<Ops, DType::bf16> {
  using Storage = uint16_t;
  static typename Ops::V load(const uint16_t* p) { return Ops::load_bf16(p); }
  static float scalar(const uint16_t* p) { return from_bf16_bits(*p); }
};
template <class Ops>
struct KvElement<Ops, DType::fp16> {
  using Storage = uint16_t;
  static typename Ops::V load(const uint16_t* p) { return Ops::load_fp16(p); }
  static float scalar(const uint16_t* p) { return from_fp16_bits(*p); }
};

// A quantized cache's codes (kv_quant.h), widened in registers: int8 codes and fp8_e4m3 codes,
// each loaded as its integer value (int8) or its E4M3 value over 2^8 (fp8), without the scale. The
// scales are applied per key outside the loops over d (scale_decode_rows, decode_piece.h): to a
// tile's scores for K, to its weights P for V, so the inner loops stay those of the dtype paths.
// The widening is written once in GCC's vector extensions (a byte load, a widening convert, and
// for fp8 kv_quant.h's shift, a multiply by 2^112 and sign), which every path's compiler lowers to
// its own instructions (vpmovsxbd and vcvtdq2ps on AVX-512), but for fp8 on AVX-512 and AVX2
// (through fp16, KvFp8E4m3Element): a store of the lanes to memory and a vector load back, the
// first version, took 3x bf16's time for int8 and 10x for fp8.
template <int kWidth>
struct CodeVectors {
  typedef int8_t Bytes __attribute__((vector_size(kWidth)));
  typedef uint8_t UnsignedBytes __attribute__((vector_size(kWidth)));
  typedef uint32_t Words __attribute__((vector_size(4 * kWidth)));
  typedef int32_t SignedWords __attribute__((vector_size(4 * kWidth)));
  typedef float Floats __attribute__((vector_size(4 * kWidth)));
};

template <class Ops, class Floats>
typename Ops::V as_ops_vector(const Floats& floats) {
  static_assert(sizeof(Floats) == sizeof(typename Ops::V), "one vector of kWidth floats");
  typename Ops::V v;
  std::memcpy(&v, &floats, sizeof v);
  return v;
}

// kWidth bytes at p widened to 32-bit lanes, sign- or zero-extended: one vpmovsxbd / vpmovzxbd on
// the AVX-512 path (16 lanes) and the AVX2 path (8), whose translation units are compiled with
// those extensions (GCC's vector conversion of bytes went a byte at a time there); the vector
// extensions' conversion on other paths.
template <class Ops, bool kSigned>
typename CodeVectors<Ops::kWidth>::SignedWords widen_bytes(const void* p) {
  using Codes = CodeVectors<Ops::kWidth>;
#if defined(__AVX512F__) || defined(ATTNBENCH_AVX512_EMULATED)
  if constexpr (Ops::kWidth == 16) {
    const __m128i bytes = _mm_loadu_si128(static_cast<const __m128i*>(p));
    const __m512i wide = kSigned ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
    typename Codes::SignedWords words;
    std::memcpy(&words, &wide, sizeof words);
    return words;
  }
#endif
#if defined(__AVX2__)
  if constexpr (Ops::kWidth == 8) {
    const __m128i bytes = _mm_loadl_epi64(static_cast<const __m128i*>(p));
    const __m256i wide = kSigned ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
    typename Codes::SignedWords words;
    std::memcpy(&words, &wide, sizeof words);
    return words;
  }
#endif
  if constexpr (kSigned) {
    typename Codes::Bytes codes;
    std::memcpy(&codes, p, sizeof codes);
    return __builtin_convertvector(codes, typename Codes::SignedWords);
  } else {
    typename Codes::UnsignedBytes codes;
    std::memcpy(&codes, p, sizeof codes);
    return __builtin_convertvector(codes, typename Codes::SignedWords);
  }
}

template <class Ops>
struct KvInt8Element {
  using Storage = int8_t;
  static typename Ops::V load(const int8_t* p) {
    if constexpr (Ops::kWidth == 1) {
      return as_ops_vector<Ops>(static_cast<float>(*p));
    } else {
      using Codes = CodeVectors<Ops::kWidth>;
      const auto words = widen_bytes<Ops, true>(p);
      return as_ops_vector<Ops>(__builtin_convertvector(words, typename Codes::Floats));
    }
  }
  static float scalar(const int8_t* p) { return static_cast<float>(*p); }
};

// fp8_e4m3 codes are loaded as their E4M3 value divided by kFp8LoadDivisor, 2^8: the magnitude
// bits of a sign-extended code shifted into an fp16's exponent and mantissa (bias 15 for E4M3's
// 7, its subnormals those of fp16) make that multiple exactly, and one vcvtph2ps widens it: four
// operations per 16 codes where the fp32 route (fp8_e4m3_value, vectorised) took seven. The
// divisor comes back through the cache's scale (scale_decode_rows, decode_piece.h): a power of
// two, so every product and sum rounds as it would on the E4M3 values themselves.
inline constexpr float kFp8LoadDivisor = 256.0f;

template <class Ops>
struct KvFp8E4m3Element {
  using Storage = uint8_t;
  static typename Ops::V load(const uint8_t* p) {
    if constexpr (Ops::kWidth == 1) {
      return as_ops_vector<Ops>(scalar(p));
    } else {
#if defined(__AVX512F__) || defined(ATTNBENCH_AVX512_EMULATED)
      if constexpr (Ops::kWidth == 16) {
        const __m256i codes = _mm256_cvtepi8_epi16(
            _mm_loadu_si128(static_cast<const __m128i*>(static_cast<const void*>(p))));
        const __m256i halves =
            _mm256_and_si256(_mm256_slli_epi16(codes, 7), _mm256_set1_epi16(kFp16Mask));
        return as_ops_vector<Ops>(_mm512_maskz_cvtph_ps(0xFFFF, halves));
      }
#endif
#if defined(__AVX2__)
      if constexpr (Ops::kWidth == 8) {
        const __m128i codes = _mm_cvtepi8_epi16(
            _mm_loadl_epi64(static_cast<const __m128i*>(static_cast<const void*>(p))));
        const __m128i halves = _mm_and_si128(_mm_slli_epi16(codes, 7), _mm_set1_epi16(kFp16Mask));
        return as_ops_vector<Ops>(_mm256_cvtph_ps(halves));
      }
#endif
      // Elsewhere fp8_e4m3_value's fp32 route, whose multiply by 2^120 becomes one by 2^112.
      using Codes = CodeVectors<Ops::kWidth>;
      const auto words = reinterpret_cast<typename Codes::Words>(widen_bytes<Ops, false>(p));
      const auto magnitude_bits = (words & 0x7Fu) << 20;
      typename Codes::Floats magnitude;
      std::memcpy(&magnitude, &magnitude_bits, sizeof magnitude);
      const typename Codes::Floats value = magnitude * 0x1p112f;
      typename Codes::Words value_bits;
      std::memcpy(&value_bits, &value, sizeof value_bits);
      value_bits |= (words & 0x80u) << 24;
      typename Codes::Floats signed_value;
      std::memcpy(&signed_value, &value_bits, sizeof signed_value);
      return as_ops_vector<Ops>(signed_value);
    }
  }
  static float scalar(const uint8_t* p) { return fp8_e4m3_value(*p) / kFp8LoadDivisor; }

 private:
  // What of a sign-extended code shifted left by 7 is the fp16 of its value / 2^8: the sign (in
  // bits 14 and 15: bit 14 cleared), the exponent in bits 10-13, the mantissa in bits 7-9.
  static constexpr short kFp16Mask = static_cast<short>(0xBF80);
};

// What a cache's scale is multiplied by before it is applied: the divisor its codes were loaded
// with (1 but for fp8_e4m3).
template <class E>
inline constexpr float kScaleUnit = 1.0f;
template <class Ops>
inline constexpr float kScaleUnit<KvFp8E4m3Element<Ops>> = kFp8LoadDivisor;

// A loaded vector several FMAs share, kept in a register. Without it GCC folds the load into each
// FMA as a memory operand, and the scores loop issued 12 loads for 8 FMAs (fp32 at 1.5 times the
// time of bf16, whose widened vectors cannot be folded, even from L2); the empty asm makes the
// value opaque, so it is loaded once.
// (Always inlined: its body differs in the emulated AVX-512 object, whose 64-byte vectors no
// register holds, so no copy of it may be shared.)
template <class V>
__attribute__((always_inline)) inline void hold_in_register(V& value) {
#if defined(ATTNBENCH_AVX512_EMULATED)
  static_cast<void>(value);
#elif defined(__x86_64__) || defined(__i386__)
  asm("" : "+x"(value));
#elif defined(__aarch64__)
  asm("" : "+w"(value));
#else
  static_cast<void>(value);
#endif
}

#if defined(__AVX512F__) || defined(ATTNBENCH_AVX512_EMULATED)
// The lane sums of the eight accumulators of four rows x two keys (acc[g][k]) into sum[g][k],
// as one tree: 16 lane shuffles and 8 additions for the eight, where a reduction of each
// accumulator on its own takes about 9 instructions. Each level halves the lanes a source holds
// and doubles the sources a vector holds: 128-bit blocks paired, then 128-bit blocks paired across
// rows, then lanes within blocks.
// A template over the path only so that each path's object has its own copy (the emulated
// AVX-512 one's instructions differ).
template <class Ops>
__attribute__((always_inline)) inline void lane_sums_4x2(const __m512 (&acc)[4][2],
                                                         float (&sum)[4][2]) {
  __m512 x[4];
  for (int g = 0; g < 4; ++g)  // blocks: a.(0+2), a.(1+3), b.(0+2), b.(1+3)
    x[g] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[g][0], acc[g][1], 0x44),
                         _mm512_shuffle_f32x4(acc[g][0], acc[g][1], 0xEE));
  // blocks: (g, key 0), (g, key 1), (g + 1, key 0), (g + 1, key 1), 4 lanes each
  const __m512 rows01 =
      _mm512_add_ps(_mm512_shuffle_f32x4(x[0], x[1], 0x88), _mm512_shuffle_f32x4(x[0], x[1], 0xDD));
  const __m512 rows23 =
      _mm512_add_ps(_mm512_shuffle_f32x4(x[2], x[3], 0x88), _mm512_shuffle_f32x4(x[2], x[3], 0xDD));
  // each block: (rows01's source, rows23's source) in lanes 0 and 1
  const __m512 pairs =
      _mm512_add_ps(_mm512_unpacklo_ps(rows01, rows23), _mm512_unpackhi_ps(rows01, rows23));
  const __m512 sums = _mm512_add_ps(pairs, _mm512_permute_ps(pairs, _MM_SHUFFLE(1, 0, 3, 2)));
  // lanes 0, 4, 8, 12: rows 0, 0, 1, 1 (keys 0, 1, 0, 1); lanes 1, 5, 9, 13: rows 2, 2, 3, 3
  const __m512i order = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 13, 9, 5, 1, 12, 8, 4, 0);
  _mm256_storeu_ps(&sum[0][0], _mm512_castps512_ps256(_mm512_permutexvar_ps(order, sums)));
}
#endif

// Asks for the cache line holding p, into L2 (which keeps more misses in flight than L1). An asm
// statement where we know the instruction: GCC 12 compiled none of the __builtin_prefetch calls
// this path made before (in a loop of nothing else, or under two conditions, it drops them). (A
// template over the path, as NextRows, so each path's object keeps its own copy.)
template <class Ops>
void prefetch_line_to_l2(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p)));
#elif defined(__aarch64__)
  asm volatile("prfm pldl2keep, %0" : : "Q"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, 2);
#endif
}

// The K or V rows of a tile further on than the one a kernel computes (decode_piece.h's
// kPrefetchTilesAhead): row j (`stride` elements after row j - 1) is asked for, line by line, as
// the kernel reads row j of its own tile, so the requests
// keep pace with the loads instead of coming in a burst per tile. While the FMAs run, the hardware
// prefetchers stop running ahead; these requests keep the memory busy through them: 0.49-0.67 of
// the decode's time on the Xeon of results/decode-prefetch-inline-ab, against none at all.
template <class Ops, class Storage>
struct NextRows {
  const Storage* rows = nullptr;
  int64_t stride = 0;
  int64_t count = 0;  // rows there are (none past the piece's last tile)

  // Row j's line holding element c, when row j exists and c is a multiple of 64 bytes into it.
  void fetch(int64_t j, int64_t c) const {
    if (j < count && (c * static_cast<int64_t>(sizeof(Storage))) % 64 == 0)
      prefetch_line_to_l2<Ops>(rows + j * stride + c);
  }
  // Row j's last element, and from element `first` (the part a kernel's scalar tail reads, where
  // there is one) on: with `fetch` every line of the row, wherever the row starts (the harness's
  // buffers start on a line, host_buffer.h, but rows of d not a multiple of 64 bytes, or a view
  // of a caller's buffer, straddle one line more).
  void fetch_rest(int64_t j, int64_t first, int64_t end) const {
    if (j >= count) return;
    if (first < end) prefetch_line_to_l2<Ops>(rows + j * stride + first);
    prefetch_line_to_l2<Ops>(rows + j * stride + end - 1);
  }
};

// scores[g][j] = q[g] . k[j] for kRows rows (q rows dk_stride apart) and `keys` keys (k rows
// k_stride apart), two keys at a time so 2 x kRows accumulators hide the FMA latency; `next`'s K
// rows asked for on the way.
template <class Ops, class E, int kRows>
void decode_scores(const float* q, int64_t dk_stride, int64_t d_k, const typename E::Storage* k,
                   int64_t k_stride, int64_t keys, float* scores,
                   const NextRows<Ops, typename E::Storage>& next) {
  using V = typename Ops::V;
  constexpr int kWidth = Ops::kWidth;
  const int64_t full = d_k / kWidth * kWidth;
  int64_t j = 0;
  for (; j + 2 <= keys; j += 2) {
    const typename E::Storage* k0 = k + j * k_stride;
    const typename E::Storage* k1 = k0 + k_stride;
    V acc[kRows][2];
#pragma GCC unroll 4
    for (int g = 0; g < kRows; ++g) acc[g][0] = acc[g][1] = Ops::zero();
    next.fetch_rest(j, full, d_k);
    next.fetch_rest(j + 1, full, d_k);
    for (int64_t c = 0; c < full; c += kWidth) {
      next.fetch(j, c);
      next.fetch(j + 1, c);
      V key0 = E::load(k0 + c), key1 = E::load(k1 + c);
      hold_in_register(key0);
      hold_in_register(key1);
#pragma GCC unroll 4
      for (int g = 0; g < kRows; ++g) {
        V query = Ops::load(q + g * dk_stride + c);
        hold_in_register(query);
        acc[g][0] = Ops::fmadd(query, key0, acc[g][0]);
        acc[g][1] = Ops::fmadd(query, key1, acc[g][1]);
      }
    }
    float sums[kRows][2];
#if defined(__AVX512F__) || defined(ATTNBENCH_AVX512_EMULATED)
    if constexpr (kRows == 4 && Ops::kWidth == 16) {
      lane_sums_4x2<Ops>(acc, sums);
    } else
#endif
    {
#pragma GCC unroll 4
      for (int g = 0; g < kRows; ++g) {
        sums[g][0] = Ops::reduce_add(acc[g][0]);
        sums[g][1] = Ops::reduce_add(acc[g][1]);
      }
    }
#pragma GCC unroll 4
    for (int g = 0; g < kRows; ++g) {
      float s0 = sums[g][0], s1 = sums[g][1];
      for (int64_t c = full; c < d_k; ++c) {
        s0 += q[g * dk_stride + c] * E::scalar(k0 + c);
        s1 += q[g * dk_stride + c] * E::scalar(k1 + c);
      }
      scores[g * kDecodeTile + j] = s0;
      scores[g * kDecodeTile + j + 1] = s1;
    }
  }
  if (j < keys) {
    const typename E::Storage* k0 = k + j * k_stride;
    V acc[kRows];
#pragma GCC unroll 4
    for (int g = 0; g < kRows; ++g) acc[g] = Ops::zero();
    next.fetch_rest(j, full, d_k);
    for (int64_t c = 0; c < full; c += kWidth) {
      next.fetch(j, c);
      const V key0 = E::load(k0 + c);
#pragma GCC unroll 4
      for (int g = 0; g < kRows; ++g)
        acc[g] = Ops::fmadd(Ops::load(q + g * dk_stride + c), key0, acc[g]);
    }
#pragma GCC unroll 4
    for (int g = 0; g < kRows; ++g) {
      float s0 = Ops::reduce_add(acc[g]);
      for (int64_t c = full; c < d_k; ++c) s0 += q[g * dk_stride + c] * E::scalar(k0 + c);
      scores[g * kDecodeTile + j] = s0;
    }
  }
}

// One row's tile of `keys` keys, in place: the modifiers (mask.h's order), keys outside [lo, hi)
// (counted from the tile's first key; hi <= keys) to -inf, then the online softmax: returns
// alpha, the output's rescale, and leaves exp2(score - max) in `scores`, times 2^-headroom_log2 on
// a pass run again after an overflow (softmax_block's reason) (0 for the masked keys and from
// `keys` to the end of its last vector; nothing is read or written past that).
template <class Ops>
float decode_softmax_row(float* scores, int64_t keys, float lo, float hi, float softcap_log2,
                         float alibi_slope_log2, float distance, float headroom_log2,
                         float* row_max, float* row_sum) {
  using V = typename Ops::V;
  constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();
  const V minus_infinity = Ops::broadcast(kMinusInfinity);
  const int64_t padded = (keys + Ops::kWidth - 1) / Ops::kWidth * Ops::kWidth;
  V tile_max = minus_infinity;
  for (int64_t j = 0; j < padded; j += Ops::kWidth) {
    V score = Ops::load(scores + j);
    const V key = Ops::load(kColumnIndex.value + j);
    if (softcap_log2 > 0)
      score = Ops::mul(Ops::broadcast(softcap_log2),
                       tanh_of<Ops>(Ops::mul(score, Ops::broadcast(1.0f / softcap_log2))));
    if (alibi_slope_log2 != 0)
      score = Ops::sub(score, Ops::mul(Ops::broadcast(alibi_slope_log2),
                                       Ops::abs(Ops::sub(Ops::broadcast(distance), key))));
    score = Ops::select_less(key, Ops::broadcast(lo), minus_infinity, score);
    score = Ops::select_less(key, Ops::broadcast(hi), score, minus_infinity);
    Ops::store(scores + j, score);
    tile_max = Ops::max(tile_max, score);
  }
  float new_max = *row_max;
  alignas(64) float lanes[kMaxWidth];
  Ops::store(lanes, tile_max);
  for (int lane = 0; lane < Ops::kWidth; ++lane) new_max = std::max(new_max, lanes[lane]);
  // A row that has seen only masked keys keeps max -inf; shifting by 0 keeps exp2 from NaN.
  const float shift = new_max == kMinusInfinity ? 0.0f : new_max;
  Ops::store(lanes, Ops::exp2(Ops::broadcast(*row_max - shift)));
  const float alpha = lanes[0];
  const bool scaled = headroom_log2 != 0;
  const V factor = Ops::broadcast(std::ldexp(1.0f, -static_cast<int>(headroom_log2)));
  V sum = Ops::zero();
  for (int64_t j = 0; j < padded; j += Ops::kWidth) {
    V probability = Ops::exp2(Ops::sub(Ops::load(scores + j), Ops::broadcast(shift)));
    if (scaled) probability = Ops::mul(probability, factor);
    Ops::store(scores + j, probability);
    sum = Ops::add(sum, probability);
  }
  *row_max = new_max;
  *row_sum = *row_sum * alpha + Ops::reduce_add(sum);
  return alpha;
}

// Whether decode_values keeps slices of the output rows in registers across a tile's keys
// (decode_values_in_registers) rather than updating them in place per pair of keys: on the AVX2
// path (16 registers of 8 floats), for V stored in 2 bytes or fewer but fp8 (bf16, fp16, int8). In
// place, a pair of keys costs 4 loads and 4 stores of the output per 8 FMAs, and Zen 3 stores one
// 256-bit vector a cycle: on one Zen 3 core, a 64-key tile's update (4 rows, d 128, V in L2) took
// 16-18 ns a key in place and 11-12 ns in registers, for fp32, bf16 and int8 V alike. But a slice
// of fp32 V is a whole line of each row, so each pass over the keys reads lines 512 bytes apart,
// which the hardware prefetchers do not follow: with V past L2 (32K keys), fp32 took 1.4-1.7x the
// in-place time where int8 took 0.75x (a slice of narrower V shares its line with the next
// passes, which find it in L1). fp8's widening (then five operations and three constants a vector)
// left the whole decode 1-2% slower in registers. results/decode-values-regs-ab has its A/B. The
// AVX-512 paths update in place: on the Xeon of results/decode-values-ab, which stores two vectors
// a cycle, registers bought nothing for fp32.
template <class Ops, class E>
constexpr bool kDecodeValuesInRegisters = Ops::kWidth == 8 && Ops::kRegisters == 16 &&
                                          sizeof(typename E::Storage) <= 2 &&
                                          !std::is_same_v<E, KvFp8E4m3Element<Ops>>;

// out[g] = alpha[g] out[g] + sum_j p[g][j] v[j] as decode_values, with a slice of kSlice vectors
// of every row's output in registers (kRows x kSlice accumulators, from zero) while the tile's
// keys pass, then added once to alpha out: per key, kSlice loads of V and kRows broadcasts of P
// per kRows x kSlice FMAs, and no stores. A slice of a V row is one line of fp32 (half of bf16,
// a quarter of int8): each pass over the keys reads the tile's V a line of each row apart, from
// L2, where `next` has asked for it (a tile ahead, line by line on the passes that start one).
template <class Ops, class E, int kRows, int kSlice>
void decode_value_slices(const float* p, const typename E::Storage* v, int64_t v_stride,
                         int64_t keys, int64_t first, int64_t end, const float* alpha, float* out,
                         int64_t dv_stride, const NextRows<Ops, typename E::Storage>& next) {
  using V = typename Ops::V;
  constexpr int kWidth = Ops::kWidth;
  for (int64_t x = first; x + kSlice * kWidth <= end; x += kSlice * kWidth) {
    V acc[kRows][kSlice];
#pragma GCC unroll 4
    for (int g = 0; g < kRows; ++g)
#pragma GCC unroll 2
      for (int u = 0; u < kSlice; ++u) acc[g][u] = Ops::zero();
    const typename E::Storage* row = v + x;
    for (int64_t j = 0; j < keys; ++j, row += v_stride) {
      next.fetch(j, x);
      V value[kSlice];
#pragma GCC unroll 2
      for (int u = 0; u < kSlice; ++u) value[u] = E::load(row + u * kWidth);
#pragma GCC unroll 4
      for (int g = 0; g < kRows; ++g) {
        const V weight = Ops::broadcast(p[g * kDecodeTile + j]);
#pragma GCC unroll 2
        for (int u = 0; u < kSlice; ++u) acc[g][u] = Ops::fmadd(weight, value[u], acc[g][u]);
      }
    }
#pragma GCC unroll 4
    for (int g = 0; g < kRows; ++g) {
      const V scale = Ops::broadcast(alpha != nullptr ? alpha[g] : 1.0f);
#pragma GCC unroll 2
      for (int u = 0; u < kSlice; ++u) {
        float* o = out + g * dv_stride + x + u * kWidth;
        Ops::store(o, Ops::fmadd(scale, Ops::load(o), acc[g][u]));
      }
    }
  }
}

// decode_values with the output in registers (kDecodeValuesInRegisters): slices of two vectors,
// then one, then the columns past the last whole vector one at a time.
template <class Ops, class E, int kRows>
void decode_values_in_registers(const float* p, const float* alpha, const typename E::Storage* v,
                                int64_t v_stride, int64_t keys, int64_t d_v, float* out,
                                int64_t dv_stride, const NextRows<Ops, typename E::Storage>& next) {
  constexpr int kWidth = Ops::kWidth;
  const int64_t pairs_end = d_v / (2 * kWidth) * (2 * kWidth);
  const int64_t full = d_v / kWidth * kWidth;
  for (int64_t j = 0; j < keys; ++j) next.fetch_rest(j, full, d_v);
  decode_value_slices<Ops, E, kRows, 2>(p, v, v_stride, keys, 0, pairs_end, alpha, out, dv_stride,
                                        next);
  decode_value_slices<Ops, E, kRows, 1>(p, v, v_stride, keys, pairs_end, full, alpha, out,
                                        dv_stride, next);
  for (int g = 0; g < kRows; ++g)
    for (int64_t c = full; c < d_v; ++c) {
      float sum = 0.0f;
      for (int64_t k = 0; k < keys; ++k)
        sum += p[g * kDecodeTile + k] * E::scalar(v + k * v_stride + c);
      out[g * dv_stride + c] = (alpha != nullptr ? alpha[g] : 1.0f) * out[g * dv_stride + c] + sum;
    }
}

// out[g] = alpha[g] out[g] + sum_j p[g][j] v[j] for kRows rows (out rows dv_stride apart, p rows
// kDecodeTile apart; alpha null: out not rescaled, a tile's runs after its first). V is read in the
// order it lies in memory, two rows at a time along the whole of d_v (the hardware prefetchers
// follow that stream; walking a tile's rows a vector at a time they do not), and the output rows,
// in L1, are updated in place; `next`'s V rows asked for on the way. On the AVX2 path,
// decode_values_in_registers instead (kDecodeValuesInRegisters).
template <class Ops, class E, int kRows>
void decode_values(const float* p, const float* alpha, const typename E::Storage* v,
                   int64_t v_stride, int64_t keys, int64_t d_v, float* out, int64_t dv_stride,
                   const NextRows<Ops, typename E::Storage>& next) {
  if constexpr (kDecodeValuesInRegisters<Ops, E>) {
    decode_values_in_registers<Ops, E, kRows>(p, alpha, v, v_stride, keys, d_v, out, dv_stride,
                                              next);
    return;
  }
  using V = typename Ops::V;
  constexpr int kWidth = Ops::kWidth;
  const int64_t full = d_v / kWidth * kWidth;
  for (int g = 0; alpha != nullptr && g < kRows; ++g) {
    const V scale = Ops::broadcast(alpha[g]);
    for (int64_t x = 0; x < full; x += kWidth)
      Ops::store(out + g * dv_stride + x, Ops::mul(scale, Ops::load(out + g * dv_stride + x)));
    for (int64_t c = full; c < d_v; ++c) out[g * dv_stride + c] *= alpha[g];
  }
  int64_t j = 0;
  for (; j + 2 <= keys; j += 2) {
    const typename E::Storage* v0 = v + j * v_stride;
    const typename E::Storage* v1 = v0 + v_stride;
    V weight0[kRows], weight1[kRows];
#pragma GCC unroll 4
    for (int g = 0; g < kRows; ++g) {
      weight0[g] = Ops::broadcast(p[g * kDecodeTile + j]);
      weight1[g] = Ops::broadcast(p[g * kDecodeTile + j + 1]);
    }
    next.fetch_rest(j, full, d_v);
    next.fetch_rest(j + 1, full, d_v);
    for (int64_t x = 0; x < full; x += kWidth) {
      next.fetch(j, x);
      next.fetch(j + 1, x);
      const V value0 = E::load(v0 + x), value1 = E::load(v1 + x);
#pragma GCC unroll 4
      for (int g = 0; g < kRows; ++g) {
        float* o = out + g * dv_stride + x;
        Ops::store(o, Ops::fmadd(weight1[g], value1, Ops::fmadd(weight0[g], value0, Ops::load(o))));
      }
    }
  }
  if (j < keys) {
    const typename E::Storage* v0 = v + j * v_stride;
    V weight0[kRows];
#pragma GCC unroll 4
    for (int g = 0; g < kRows; ++g) weight0[g] = Ops::broadcast(p[g * kDecodeTile + j]);
    next.fetch_rest(j, full, d_v);
    for (int64_t x = 0; x < full; x += kWidth) {
      next.fetch(j, x);
      const V value0 = E::load(v0 + x);
#pragma GCC unroll 4
      for (int g = 0; g < kRows; ++g) {
        float* o = out + g * dv_stride + x;
        Ops::store(o, Ops::fmadd(weight0[g], value0, Ops::load(o)));
      }
    }
  }
  for (int g = 0; g < kRows; ++g)
    for (int64_t c = full; c < d_v; ++c) {
      float sum = out[g * dv_stride + c];
      for (int64_t k = 0; k < keys; ++k)
        sum += p[g * kDecodeTile + k] * E::scalar(v + k * v_stride + c);
      out[g * dv_stride + c] = sum;
    }
}

// One run of a tile's keys for one KV head, as the kernels below take it: `count` rows from
// `rows` (a tile's stride apart), the tile's keys from `offset` on; `next` the rows asked for
// while they are read.
template <class Ops, class Storage>
struct KernelRun {
  const Storage* rows = nullptr;
  int64_t count = 0, offset = 0;
  NextRows<Ops, Storage> next;
};

// decode_scores over each of a tile's runs in turn, into the rows' scores at the runs' offsets:
// one call a tile and KV head, where a paged tile has a run per page (decode_piece.h). (The
// kernels are not forced inline here: inlined into the loop, fp8's took 1.02-1.05x the time in
// L2, results/decode-paged-runs-ab.)
template <class Ops, class E, int kRows>
void decode_scores_runs(const float* q, int64_t dk_stride, int64_t d_k,
                        const KernelRun<Ops, typename E::Storage>* runs, int run_count,
                        int64_t k_stride, float* scores) {
  for (int i = 0; i < run_count; ++i)
    decode_scores<Ops, E, kRows>(q, dk_stride, d_k, runs[i].rows, k_stride, runs[i].count,
                                 scores + runs[i].offset, runs[i].next);
}

// decode_values over each of a tile's runs in turn, from the weights at the runs' offsets; alpha
// rescales the output before the first.
template <class Ops, class E, int kRows>
void decode_values_runs(const float* p, const float* alpha,
                        const KernelRun<Ops, typename E::Storage>* runs, int run_count,
                        int64_t v_stride, int64_t d_v, float* out, int64_t dv_stride) {
  for (int i = 0; i < run_count; ++i)
    decode_values<Ops, E, kRows>(p + runs[i].offset, i == 0 ? alpha : nullptr, runs[i].rows,
                                 v_stride, runs[i].count, d_v, out, dv_stride, runs[i].next);
}

}  // namespace attnbench::flash_cpu
