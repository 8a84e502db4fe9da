// The AVX-512 instructions flash_cpu's AVX-512 code uses (harness/simd/avx512.h; the avx512_bf16
// path's forward, backward and decode, bf16_dot.h; the amx_bf16 path's vector steps), in plain C++
// lane by lane, so that this code as written compiles and runs on a CPU with AVX2 and no AVX-512
// (AMD Zen 3): the avx512_bf16 path (kernels_avx512_bf16_emulated.cpp) and the amx_bf16 path on
// emulated tiles (tile_emulation.h, kernels_amx_bf16_emulated.cpp) then meet the float64 oracle
// on every x86-64 host this project runs on. For tests, not for timing.
//
// How: included first by those two files alone (compiled with AVX2's options), it
// declares each intrinsic's name in namespace attnbench (in an unnamed namespace there).
// Unqualified lookup from the code inside attnbench finds these before the global ones of
// <immintrin.h> (which would need AVX-512), and AVX-512's vector types carry no namespace for
// argument-dependent lookup to add; the names that <immintrin.h> may define as macros (the forms
// taking immediates) are undefined first. A name used but not emulated here still resolves to the
// real intrinsic and fails to compile in that file: nothing of AVX-512 can run where it is absent.
//
// Each follows the Intel SDM's definition (and GCC's order of additions for the reduction), so
// the emulated path computes what the hardware path computes: VCVTNEPS2BF16 rounds to nearest
// even, quiets NaNs and flushes denormals to signed zero; VDPBF16PS reads denormal bf16 as zero,
// adds the odd pair's product then the even one's (each a fused multiply-add), and flushes
// denormal sums; VSCALEFPS is
// a x 2^floor(b). Only the predicates and rounding modes the path uses are taken (others throw).
#pragma once

#if defined(__AVX512F__)
#error "avx512_emulation.h is for translation units without AVX-512"
#endif

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#define ATTNBENCH_AVX512_EMULATED 1

#undef _mm512_cmp_ps_mask
#undef _mm512_slli_epi32
#undef _mm512_maskz_slli_epi32
#undef _mm512_shuffle_i32x4
#undef _mm512_mul_round_ps
#undef _mm512_roundscale_ps
#undef _mm512_reduce_ps
#undef _mm512_mask_extractf64x4_pd
#undef _mm512_maskz_cvtph_ps
#undef _mm512_scalef_ps
#undef _mm512_shuffle_f32x4
#undef _mm512_permute_ps
#undef _mm512_maskz_inserti64x4

namespace attnbench {
// Unnamed: the names have this translation unit's linkage alone, so no copy of them is ever
// shared with another object (tests/build_checks/isa_symbols.sh); unqualified lookup from within
// attnbench still finds them, as if declared in attnbench itself.
namespace {

namespace avx512_emulation {

// The 64 bytes of a vector as lanes of T, and back (templates over the lane type only: an
// AVX-512 vector type as a template argument loses its alignment attribute).
template <class T>
struct Lanes {
  static constexpr int kCount = static_cast<int>(64 / sizeof(T));
  T lane[kCount] = {};
  Lanes() = default;
  explicit Lanes(const void* vector) { std::memcpy(lane, vector, 64); }
};
using Floats = Lanes<float>;
using Words = Lanes<uint32_t>;
inline __m512 floats_vector(const Floats& lanes) {
  __m512 v;
  std::memcpy(&v, lanes.lane, sizeof v);
  return v;
}
template <class T>
__m512i integer_vector(const Lanes<T>& lanes) {
  __m512i v;
  std::memcpy(&v, lanes.lane, sizeof v);
  return v;
}

inline float float_of(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}
inline uint32_t bits_of(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// VCVTNEPS2BF16's conversion of one float.
inline uint16_t to_bf16_rne(float x) {
  const uint32_t bits = bits_of(x);
  const uint32_t exponent = bits & 0x7F800000u;
  if (exponent == 0) return static_cast<uint16_t>((bits >> 16) & 0x8000u);  // zero, denormal
  if (exponent == 0x7F800000u) {
    if ((bits & 0x007FFFFFu) == 0) return static_cast<uint16_t>(bits >> 16);  // infinity
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);                     // quiet NaN
  }
  const uint32_t rounding_bias = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

// VDPBF16PS's reading of a bf16: widened, a denormal as a signed zero.
inline float from_bf16_daz(uint16_t bits) {
  if ((bits & 0x7F80u) == 0) bits &= 0x8000u;
  return float_of(static_cast<uint32_t>(bits) << 16);
}
inline float flush_denormal(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}

template <class F>
__m512 each_float(F f) {
  Floats out;
  for (int i = 0; i < 16; ++i) out.lane[i] = f(i);
  return floats_vector(out);
}
inline __m512 masked(__mmask16 k, __m512 when_set, __m512 otherwise) {
  const Floats a(&when_set), b(&otherwise);
  return each_float([&](int i) { return (k >> i) & 1 ? a.lane[i] : b.lane[i]; });
}
inline __m512 zeros() { return floats_vector(Floats()); }

// VPUNPCKL* / VPUNPCKH*: within each 128-bit block, the low (or high) half's lanes of a and b
// taken in turn.
template <class Lane>
__m512i interleave_blocks(__m512i a, __m512i b, bool high) {
  constexpr int kPerBlock = static_cast<int>(16 / sizeof(Lane));
  const Lanes<Lane> x(&a), y(&b);
  Lanes<Lane> out;
  for (int block = 0; block < Lanes<Lane>::kCount; block += kPerBlock)
    for (int i = 0; i < kPerBlock / 2; ++i) {
      const int from = block + (high ? kPerBlock / 2 : 0) + i;
      out.lane[block + 2 * i] = x.lane[from];
      out.lane[block + 2 * i + 1] = y.lane[from];
    }
  return integer_vector(out);
}

// The 16 bytes of a as Byte (int8_t or uint8_t), each widened to a 32-bit lane.
template <class Byte>
__m512i widen_bytes(__m128i a) {
  Byte bytes[16];
  std::memcpy(bytes, &a, sizeof bytes);
  Words out;
  for (int i = 0; i < 16; ++i) out.lane[i] = static_cast<uint32_t>(static_cast<int32_t>(bytes[i]));
  return integer_vector(out);
}

}  // namespace avx512_emulation

// --- set, cast, load, store -------------------------------------------------------------------
inline __m512 _mm512_setzero_ps() { return avx512_emulation::zeros(); }
inline __m512i _mm512_setzero_si512() {
  return avx512_emulation::integer_vector(avx512_emulation::Words());
}
inline __m512 _mm512_set1_ps(float x) {
  return avx512_emulation::each_float([x](int) { return x; });
}
inline __m512i _mm512_set1_epi32(int x) {
  avx512_emulation::Words out;
  for (auto& lane : out.lane) lane = static_cast<uint32_t>(x);
  return avx512_emulation::integer_vector(out);
}
// Arguments from the highest lane (e31) to the lowest (e0), as the intrinsic takes them.
inline __m512i _mm512_set_epi16(short e31, short e30, short e29, short e28, short e27, short e26,
                                short e25, short e24, short e23, short e22, short e21, short e20,
                                short e19, short e18, short e17, short e16, short e15, short e14,
                                short e13, short e12, short e11, short e10, short e9, short e8,
                                short e7, short e6, short e5, short e4, short e3, short e2,
                                short e1, short e0) {
  const short lanes[32] = {e0,  e1,  e2,  e3,  e4,  e5,  e6,  e7,  e8,  e9,  e10,
                           e11, e12, e13, e14, e15, e16, e17, e18, e19, e20, e21,
                           e22, e23, e24, e25, e26, e27, e28, e29, e30, e31};
  __m512i v;
  std::memcpy(&v, lanes, sizeof v);
  return v;
}
// Arguments from the highest lane (e15) to the lowest (e0).
inline __m512i _mm512_set_epi32(int e15, int e14, int e13, int e12, int e11, int e10, int e9,
                                int e8, int e7, int e6, int e5, int e4, int e3, int e2, int e1,
                                int e0) {
  const int lanes[16] = {e0, e1, e2, e3, e4, e5, e6, e7, e8, e9, e10, e11, e12, e13, e14, e15};
  __m512i v;
  std::memcpy(&v, lanes, sizeof v);
  return v;
}
inline __m512 _mm512_castsi512_ps(__m512i x) { return reinterpret_cast<__m512>(x); }
inline __m512i _mm512_castps_si512(__m512 x) { return reinterpret_cast<__m512i>(x); }
inline __m512d _mm512_castps_pd(__m512 x) { return reinterpret_cast<__m512d>(x); }

inline __m512 _mm512_loadu_ps(const void* p) {
  __m512 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline __m512i _mm512_loadu_si512(const void* p) {
  __m512i v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void _mm512_storeu_ps(void* p, __m512 x) { std::memcpy(p, &x, sizeof x); }
inline void _mm512_storeu_si512(void* p, __m512i x) { std::memcpy(p, &x, sizeof x); }
// Only the lanes whose mask bit is set are written (the others' memory is never touched).
inline void _mm512_mask_storeu_epi32(void* p, __mmask16 k, __m512i x) {
  const avx512_emulation::Words words(&x);
  for (int i = 0; i < 16; ++i)
    if ((k >> i) & 1) std::memcpy(static_cast<char*>(p) + 4 * i, &words.lane[i], 4);
}
// Only the lanes whose mask bit is set are read (the others' memory is never touched).
inline __m256i _mm256_maskz_loadu_epi16(__mmask16 k, const void* p) {
  uint16_t lanes[16] = {};
  for (int i = 0; i < 16; ++i)
    if ((k >> i) & 1) std::memcpy(&lanes[i], static_cast<const char*>(p) + 2 * i, 2);
  __m256i v;
  std::memcpy(&v, lanes, sizeof v);
  return v;
}

// --- arithmetic --------------------------------------------------------------------------------
inline __m512 _mm512_add_ps(__m512 a, __m512 b) { return a + b; }
inline __m512 _mm512_sub_ps(__m512 a, __m512 b) { return a - b; }
inline __m512 _mm512_mul_ps(__m512 a, __m512 b) { return a * b; }
inline __m512 _mm512_div_ps(__m512 a, __m512 b) { return a / b; }
inline __m512 _mm512_fmadd_ps(__m512 a, __m512 b, __m512 c) {
  const avx512_emulation::Floats x(&a), y(&b), z(&c);
  return avx512_emulation::each_float(
      [&](int i) { return std::fma(x.lane[i], y.lane[i], z.lane[i]); });
}
// A product rounded on its own, as the instruction's is: the empty asm keeps the compiler from
// fusing it with an addition that follows (which the path takes this form to avoid).
inline __m512 _mm512_mul_round_ps(__m512 a, __m512 b, int rounding) {
  if (rounding != (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
    throw std::logic_error("avx512 emulation: _mm512_mul_round_ps rounds to nearest only");
  const avx512_emulation::Floats x(&a), y(&b);
  return avx512_emulation::each_float([&](int i) {
    float product = x.lane[i] * y.lane[i];
    asm("" : "+x"(product));
    return product;
  });
}
// VMAXPS / VMINPS: the second operand where either is NaN or both are zeros.
inline __m512 _mm512_maskz_max_ps(__mmask16 k, __m512 a, __m512 b) {
  const avx512_emulation::Floats x(&a), y(&b);
  return avx512_emulation::masked(k, avx512_emulation::each_float([&](int i) {
                                    return x.lane[i] > y.lane[i] ? x.lane[i] : y.lane[i];
                                  }),
                                  avx512_emulation::zeros());
}
inline __m512 _mm512_maskz_min_ps(__mmask16 k, __m512 a, __m512 b) {
  const avx512_emulation::Floats x(&a), y(&b);
  return avx512_emulation::masked(k, avx512_emulation::each_float([&](int i) {
                                    return x.lane[i] < y.lane[i] ? x.lane[i] : y.lane[i];
                                  }),
                                  avx512_emulation::zeros());
}
inline __m512 _mm512_maskz_div_ps(__mmask16 k, __m512 a, __m512 b) {
  return avx512_emulation::masked(k, a / b, avx512_emulation::zeros());
}
inline __m512 _mm512_roundscale_ps(__m512 a, int mode) {
  if ((mode & 0xF4) != 0) throw std::logic_error("avx512 emulation: roundscale without scale only");
  const avx512_emulation::Floats x(&a);
  return avx512_emulation::each_float([&](int i) {
    switch (mode & 3) {
      case 0: return std::nearbyint(x.lane[i]);
      case 1: return std::floor(x.lane[i]);
      case 2: return std::ceil(x.lane[i]);
      default: return std::trunc(x.lane[i]);
    }
  });
}
// VSCALEFPS: a x 2^floor(b), rounded once (a NaN b gives NaN; an infinite one is clamped, which
// gives the hardware's 0 or infinity for a finite, nonzero a).
inline __m512 _mm512_scalef_ps(__m512 a, __m512 b) {
  const avx512_emulation::Floats x(&a), y(&b);
  return avx512_emulation::each_float([&](int i) {
    if (std::isnan(y.lane[i])) return y.lane[i];
    const float exponent = std::fmax(-1000.0f, std::fmin(1000.0f, std::floor(y.lane[i])));
    return std::ldexp(x.lane[i], static_cast<int>(exponent));
  });
}
// GCC's order: the 256-bit halves added, then the 128-bit halves, then pairs, then the two.
inline float _mm512_reduce_add_ps(__m512 a) {
  const avx512_emulation::Floats x(&a);
  float half[8], quarter[4], pairs[2];
  for (int i = 0; i < 8; ++i) half[i] = x.lane[i + 8] + x.lane[i];
  for (int i = 0; i < 4; ++i) quarter[i] = half[i + 4] + half[i];
  for (int i = 0; i < 2; ++i) pairs[i] = quarter[i] + quarter[i + 2];
  return pairs[0] + pairs[1];
}

// --- compare, select ----------------------------------------------------------------------------
inline __mmask16 _mm512_cmp_ps_mask(__m512 a, __m512 b, int predicate) {
  const avx512_emulation::Floats x(&a), y(&b);
  __mmask16 k = 0;
  for (int i = 0; i < 16; ++i) {
    const float p = x.lane[i], q = y.lane[i];
    const bool unordered = std::isnan(p) || std::isnan(q);
    bool holds = false;
    switch (predicate) {
      case _CMP_LT_OQ: holds = !unordered && p < q; break;
      case _CMP_GT_OQ: holds = !unordered && p > q; break;
      case _CMP_NEQ_UQ: holds = unordered || p != q; break;
      case _CMP_NLE_UQ: holds = unordered || !(p <= q); break;
      default: throw std::logic_error("avx512 emulation: a comparison predicate not emulated");
    }
    if (holds) k = static_cast<__mmask16>(k | (1u << i));
  }
  return k;
}
inline __m512 _mm512_mask_blend_ps(__mmask16 k, __m512 a, __m512 b) {
  return avx512_emulation::masked(k, b, a);
}
inline __m512 _mm512_mask_mov_ps(__m512 source, __mmask16 k, __m512 a) {
  return avx512_emulation::masked(k, a, source);
}
inline __m512 _mm512_maskz_mov_ps(__mmask16 k, __m512 a) {
  return avx512_emulation::masked(k, a, avx512_emulation::zeros());
}

// --- integer lanes
// --------------------------------------------------------------------------------
inline __m512i _mm512_and_si512(__m512i a, __m512i b) { return a & b; }
inline __m512i _mm512_or_si512(__m512i a, __m512i b) { return a | b; }
inline __m512i _mm512_maskz_and_epi32(__mmask16 k, __m512i a, __m512i b) {
  return _mm512_castps_si512(_mm512_maskz_mov_ps(k, _mm512_castsi512_ps(a & b)));
}
inline __m512i _mm512_slli_epi32(__m512i a, unsigned int count) {
  avx512_emulation::Words words(&a);
  for (auto& lane : words.lane) lane = count > 31 ? 0u : lane << count;
  return avx512_emulation::integer_vector(words);
}
inline __m512i _mm512_maskz_slli_epi32(__mmask16 k, __m512i a, unsigned int count) {
  return _mm512_castps_si512(
      _mm512_maskz_mov_ps(k, _mm512_castsi512_ps(_mm512_slli_epi32(a, count))));
}
// VPMOVSXBD / VPMOVZXBD: the 16 bytes of a, sign- or zero-extended to 32-bit lanes.
inline __m512i _mm512_cvtepi8_epi32(__m128i a) { return avx512_emulation::widen_bytes<int8_t>(a); }
inline __m512i _mm512_cvtepu8_epi32(__m128i a) { return avx512_emulation::widen_bytes<uint8_t>(a); }
inline __m512i _mm512_cvtepu16_epi32(__m256i a) {
  uint16_t halves[16];
  std::memcpy(halves, &a, sizeof halves);
  avx512_emulation::Words words;
  for (int i = 0; i < 16; ++i) words.lane[i] = halves[i];
  return avx512_emulation::integer_vector(words);
}
inline __m512i _mm512_maskz_cvtepu16_epi32(__mmask16 k, __m256i a) {
  return _mm512_castps_si512(_mm512_maskz_mov_ps(k, _mm512_castsi512_ps(_mm512_cvtepu16_epi32(a))));
}
inline __m512 _mm512_maskz_cvtph_ps(__mmask16 k, __m256i a) {
  uint16_t halves[16];
  std::memcpy(halves, &a, sizeof halves);
  const __m512 wide = avx512_emulation::each_float([&](int i) { return _cvtsh_ss(halves[i]); });
  return _mm512_maskz_mov_ps(k, wide);
}
// The 256-bit half `which` of a, its 64-bit lanes kept where k says, else from source.
inline __m256d _mm512_mask_extractf64x4_pd(__m256d source, __mmask8 k, __m512d a, int which) {
  double lanes[8], kept[4];
  std::memcpy(lanes, &a, sizeof lanes);
  std::memcpy(kept, &source, sizeof kept);
  for (int i = 0; i < 4; ++i)
    if ((k >> i) & 1) kept[i] = lanes[4 * (which & 1) + i];
  __m256d v;
  std::memcpy(&v, kept, sizeof v);
  return v;
}

// --- shuffles (within 128-bit blocks, across them, across the vector) ----------------------------
inline __m512i _mm512_unpacklo_epi32(__m512i a, __m512i b) {
  return avx512_emulation::interleave_blocks<uint32_t>(a, b, false);
}
inline __m512i _mm512_unpackhi_epi32(__m512i a, __m512i b) {
  return avx512_emulation::interleave_blocks<uint32_t>(a, b, true);
}
inline __m512i _mm512_unpacklo_epi64(__m512i a, __m512i b) {
  return avx512_emulation::interleave_blocks<uint64_t>(a, b, false);
}
inline __m512i _mm512_unpackhi_epi64(__m512i a, __m512i b) {
  return avx512_emulation::interleave_blocks<uint64_t>(a, b, true);
}
// 128-bit blocks: a's blocks imm[1:0] and imm[3:2], then b's imm[5:4] and imm[7:6].
inline __m512i _mm512_shuffle_i32x4(__m512i a, __m512i b, int imm) {
  const avx512_emulation::Words x(&a), y(&b);
  avx512_emulation::Words out;
  for (int block = 0; block < 4; ++block) {
    const avx512_emulation::Words& from = block < 2 ? x : y;
    const int source = (imm >> (2 * block)) & 3;
    for (int i = 0; i < 4; ++i) out.lane[4 * block + i] = from.lane[4 * source + i];
  }
  return avx512_emulation::integer_vector(out);
}
// 128-bit blocks as _mm512_shuffle_i32x4's, of floats.
inline __m512 _mm512_shuffle_f32x4(__m512 a, __m512 b, int imm) {
  return _mm512_castsi512_ps(
      _mm512_shuffle_i32x4(_mm512_castps_si512(a), _mm512_castps_si512(b), imm));
}
inline __m512 _mm512_unpacklo_ps(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_unpacklo_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
inline __m512 _mm512_unpackhi_ps(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_unpackhi_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
// VPERMILPS with an immediate: within each 128-bit block, lane i takes the block's lane
// imm[2i + 1 : 2i].
inline __m512 _mm512_permute_ps(__m512 a, int imm) {
  const avx512_emulation::Floats x(&a);
  return avx512_emulation::each_float(
      [&](int i) { return x.lane[(i & ~3) + ((imm >> (2 * (i & 3))) & 3)]; });
}
// VPERMPS: lane i takes a's lane index[i] (its low 4 bits).
inline __m512 _mm512_permutexvar_ps(__m512i index, __m512 a) {
  const avx512_emulation::Words which(&index);
  const avx512_emulation::Floats x(&a);
  return avx512_emulation::each_float([&](int i) { return x.lane[which.lane[i] & 15]; });
}
// `a` with 256-bit half `which` (imm bit 0) replaced by b, then the 64-bit lanes whose mask bit
// is clear zeroed.
inline __m512i _mm512_maskz_inserti64x4(__mmask8 k, __m512i a, __m256i b, int which) {
  avx512_emulation::Lanes<uint64_t> out(&a);
  std::memcpy(&out.lane[4 * (which & 1)], &b, sizeof b);
  for (int i = 0; i < 8; ++i)
    if (!((k >> i) & 1)) out.lane[i] = 0;
  return avx512_emulation::integer_vector(out);
}
// The low 256 bits.
inline __m256 _mm512_castps512_ps256(__m512 a) {
  __m256 low;
  std::memcpy(&low, &a, sizeof low);
  return low;
}
inline __m512i _mm512_permutexvar_epi16(__m512i index, __m512i a) {
  const avx512_emulation::Lanes<uint16_t> which(&index), x(&a);
  avx512_emulation::Lanes<uint16_t> out;
  for (int i = 0; i < 32; ++i) out.lane[i] = x.lane[which.lane[i] & 31];
  return avx512_emulation::integer_vector(out);
}

// --- bf16 --------------------------------------------------------------------------------------
inline __m256bh _mm512_cvtneps_pbh(__m512 a) {
  const avx512_emulation::Floats x(&a);
  uint16_t halves[16];
  for (int i = 0; i < 16; ++i) halves[i] = avx512_emulation::to_bf16_rne(x.lane[i]);
  __m256bh v;
  std::memcpy(&v, halves, sizeof v);
  return v;
}
// b's 16 values in the low lanes, a's in the high ones.
inline __m512bh _mm512_cvtne2ps_pbh(__m512 a, __m512 b) {
  const avx512_emulation::Floats high(&a), low(&b);
  uint16_t halves[32];
  for (int i = 0; i < 16; ++i) {
    halves[i] = avx512_emulation::to_bf16_rne(low.lane[i]);
    halves[i + 16] = avx512_emulation::to_bf16_rne(high.lane[i]);
  }
  __m512bh v;
  std::memcpy(&v, halves, sizeof v);
  return v;
}
inline __m512 _mm512_dpbf16_ps(__m512 source, __m512bh a, __m512bh b) {
  using avx512_emulation::flush_denormal;
  using avx512_emulation::from_bf16_daz;
  const avx512_emulation::Floats sum(&source);
  uint16_t x[32], y[32];
  std::memcpy(x, &a, sizeof x);
  std::memcpy(y, &b, sizeof y);
  // Each step a fused multiply-add, as the SDM has it (the product of two bf16 is exact in fp32
  // only within its range).
  return avx512_emulation::each_float([&](int i) {
    const float odd = std::fma(from_bf16_daz(x[2 * i + 1]), from_bf16_daz(y[2 * i + 1]),
                               flush_denormal(sum.lane[i]));
    return flush_denormal(
        std::fma(from_bf16_daz(x[2 * i]), from_bf16_daz(y[2 * i]), flush_denormal(odd)));
  });
}

}  // namespace
}  // namespace attnbench
