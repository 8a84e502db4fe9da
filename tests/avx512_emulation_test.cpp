// harness/simd/avx512_emulation.h against the Intel SDM's definitions, on values chosen for each
// instruction's edges: bf16 rounding (ties to even, NaN quieted, denormals to signed zero), the
// order and flushing of VDPBF16PS, comparison predicates with NaN, VMAXPS's second operand, the
// shuffles' lane orders, VSCALEFPS, the reduction's order, and masked loads and stores that touch
// no memory outside their mask. Compiled as kernels_amx_bf16_emulated.cpp is (AVX2, AVX-512 off:
// CMakeLists.txt), on x86-64 only; the path's own tests run the emulation through the oracle.
#include <catch2/catch.hpp>

#if defined(__x86_64__)

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "harness/simd/avx512_emulation.h"

namespace attnbench {
namespace {

template <class Lane, class Vector>
void lanes_of(const Vector& v, Lane (&out)[sizeof(Vector) / sizeof(Lane)]) {
  std::memcpy(out, &v, sizeof v);
}
__m512 from_floats(const float (&lanes)[16]) {
  __m512 v;
  std::memcpy(&v, lanes, sizeof v);
  return v;
}
uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
float from_bits(uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

TEST_CASE("emulated VCVTNEPS2BF16 rounds ties to even, quiets NaN, flushes denormals",
          "[simd][emulation]") {
  float in[16] = {};
  in[0] = 1.0f;
  in[1] = from_bits(0x3F808000u);  // halfway between two bf16, lower one even: down
  in[2] = from_bits(0x3F818000u);  // halfway, upper one even: up
  in[3] = from_bits(0x3F808001u);  // just above halfway: up
  in[4] = from_bits(0x00000001u);  // smallest denormal: +0
  in[5] = from_bits(0x80400000u);  // negative denormal: -0
  in[6] = std::numeric_limits<float>::infinity();
  in[7] = from_bits(0x7F800001u);  // signalling NaN: quieted, not rounded to infinity
  in[8] = from_bits(0x7F7FFFFFu);  // the largest float rounds up to infinity
  const __m256bh out = _mm512_cvtneps_pbh(from_floats(in));
  uint16_t half[16];
  lanes_of(out, half);
  CHECK(half[0] == 0x3F80);
  CHECK(half[1] == 0x3F80);
  CHECK(half[2] == 0x3F82);
  CHECK(half[3] == 0x3F81);
  CHECK(half[4] == 0x0000);
  CHECK(half[5] == 0x8000);
  CHECK(half[6] == 0x7F80);
  CHECK(half[7] == 0x7FC0);
  CHECK(half[8] == 0x7F80);
  // Two registers: the second operand's values in the low half.
  float ones[16], twos[16];
  for (int i = 0; i < 16; ++i) ones[i] = 1.0f, twos[i] = 2.0f;
  const __m512bh both = _mm512_cvtne2ps_pbh(from_floats(twos), from_floats(ones));
  uint16_t all[32];
  lanes_of(both, all);
  CHECK(all[0] == 0x3F80);
  CHECK(all[15] == 0x3F80);
  CHECK(all[16] == 0x4000);
  CHECK(all[31] == 0x4000);
}

TEST_CASE("emulated VDPBF16PS adds the odd pair then the even one, denormals as zero",
          "[simd][emulation]") {
  // Lane 0: 2^24 + 1 * 1 (odd) + 1 * 1 (even): each sum rounded to even, so 2^24 stays.
  // Lane 1: 1 + 2^24 (odd, rounds to 2^24) - 2^24 (even) = 0; even first would give exactly 1.
  // Lane 2: a denormal bf16 (exponent 0) is read as zero: 2^-127 x 2^20 would be a normal 2^-107.
  float source[16] = {};
  source[0] = 16777216.0f;
  uint16_t a[32] = {}, b[32] = {};
  a[0] = a[1] = b[0] = b[1] = 0x3F80;  // lane 0: 1 x 1 twice
  a[3] = 0x4B80, b[3] = 0x3F80;        // lane 1, odd: 2^24 x 1
  a[2] = 0xCB80, b[2] = 0x3F80;        // lane 1, even: -2^24 x 1
  a[5] = 0x0040, b[5] = 0x4980;        // lane 2, odd: a denormal x 2^20
  __m512bh x, y;
  std::memcpy(&x, a, sizeof x);
  std::memcpy(&y, b, sizeof y);
  source[1] = 1.0f;
  float out[16];
  lanes_of(_mm512_dpbf16_ps(from_floats(source), x, y), out);
  CHECK(out[0] == 16777216.0f);
  CHECK(out[1] == 0.0f);
  CHECK(bits(out[2]) == 0u);
}

TEST_CASE("emulated comparisons, max and blends follow the SDM on NaN and zeros",
          "[simd][emulation]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float a[16] = {}, b[16] = {};
  a[0] = 1, b[0] = 2;    // ordered, less
  a[1] = nan, b[1] = 2;  // unordered
  a[2] = 3, b[2] = 3;    // equal
  a[3] = 4, b[3] = -1;   // greater
  a[4] = 0.0f, b[4] = -0.0f;
  const __m512 x = from_floats(a), y = from_floats(b);
  const auto bit = [](__mmask16 k, int i) { return (k >> i) & 1; };
  const __mmask16 lt = _mm512_cmp_ps_mask(x, y, _CMP_LT_OQ);
  CHECK(bit(lt, 0) == 1);
  CHECK(bit(lt, 1) == 0);
  const __mmask16 neq = _mm512_cmp_ps_mask(x, y, _CMP_NEQ_UQ);
  CHECK(bit(neq, 1) == 1);
  CHECK(bit(neq, 2) == 0);
  const __mmask16 nle = _mm512_cmp_ps_mask(x, y, _CMP_NLE_UQ);
  CHECK(bit(nle, 0) == 0);
  CHECK(bit(nle, 1) == 1);
  CHECK(bit(nle, 3) == 1);
  CHECK(bit(_mm512_cmp_ps_mask(x, y, _CMP_GT_OQ), 3) == 1);
  CHECK_THROWS(_mm512_cmp_ps_mask(x, y, _CMP_EQ_OQ));
  float m[16];
  lanes_of(_mm512_maskz_max_ps(0xFFFF, x, y), m);
  CHECK(m[0] == 2.0f);
  CHECK(m[1] == 2.0f);        // a NaN first operand: the second
  CHECK(std::signbit(m[4]));  // two zeros: the second
  lanes_of(_mm512_maskz_max_ps(0x0001, x, y), m);
  CHECK(m[3] == 0.0f);  // masked off: zero
  lanes_of(_mm512_mask_blend_ps(0x0001, x, y), m);
  CHECK(m[0] == 2.0f);
  CHECK(m[3] == 4.0f);
}

TEST_CASE("emulated shuffles place lanes as the SDM does", "[simd][emulation]") {
  uint32_t a[16], b[16];
  for (int i = 0; i < 16; ++i)
    a[i] = static_cast<uint32_t>(i), b[i] = static_cast<uint32_t>(100 + i);
  __m512i x, y;
  std::memcpy(&x, a, sizeof x);
  std::memcpy(&y, b, sizeof y);
  uint32_t out[16];
  lanes_of(_mm512_unpacklo_epi32(x, y), out);
  CHECK(out[0] == 0);
  CHECK(out[1] == 100);
  CHECK(out[3] == 101);
  CHECK(out[4] == 4);
  lanes_of(_mm512_unpackhi_epi32(x, y), out);
  CHECK(out[0] == 2);
  CHECK(out[1] == 102);
  lanes_of(_mm512_unpackhi_epi64(x, y), out);
  CHECK(out[0] == 2);
  CHECK(out[2] == 102);
  lanes_of(_mm512_shuffle_i32x4(x, y, 0xDD), out);  // blocks 1, 3 of a, then 1, 3 of b
  CHECK(out[0] == 4);
  CHECK(out[4] == 12);
  CHECK(out[8] == 104);
  CHECK(out[12] == 112);
  const __m512i order = _mm512_set_epi16(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                         17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30,
                                         31 + 32);  // lane 0 takes element 63 & 31 = 31
  uint16_t halves[32], reversed[32];
  for (int i = 0; i < 32; ++i) halves[i] = static_cast<uint16_t>(i);
  __m512i h;
  std::memcpy(&h, halves, sizeof h);
  lanes_of(_mm512_permutexvar_epi16(order, h), reversed);
  CHECK(reversed[0] == 31);
  CHECK(reversed[31] == 0);
}

TEST_CASE("emulated float shuffles, inserts and byte widening place lanes as the SDM does",
          "[simd][emulation]") {
  float a[16], b[16];
  for (int i = 0; i < 16; ++i) a[i] = static_cast<float>(i), b[i] = static_cast<float>(100 + i);
  const __m512 x = from_floats(a), y = from_floats(b);
  float out[16];
  lanes_of(_mm512_shuffle_f32x4(x, y, 0x4E), out);  // blocks 2, 3 of a, then 0, 1 of b
  CHECK(out[0] == 8);
  CHECK(out[4] == 12);
  CHECK(out[8] == 100);
  CHECK(out[12] == 104);
  lanes_of(_mm512_unpacklo_ps(x, y), out);
  CHECK((out[0] == 0 && out[1] == 100 && out[2] == 1 && out[3] == 101 && out[4] == 4));
  lanes_of(_mm512_unpackhi_ps(x, y), out);
  CHECK((out[0] == 2 && out[1] == 102 && out[2] == 3 && out[3] == 103 && out[12] == 14));
  // Within each block, lane i takes lane imm[2i + 1 : 2i]: (1, 0, 3, 2) swaps the halves,
  // 0x39 = (0, 3, 2, 1) rotates by one.
  lanes_of(_mm512_permute_ps(x, _MM_SHUFFLE(1, 0, 3, 2)), out);
  CHECK((out[0] == 2 && out[1] == 3 && out[2] == 0 && out[3] == 1 && out[4] == 6));
  lanes_of(_mm512_permute_ps(x, 0x39), out);
  CHECK((out[0] == 1 && out[1] == 2 && out[2] == 3 && out[3] == 0 && out[15] == 12));
  lanes_of(_mm512_permutexvar_ps(_mm512_set_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
                                                  15 + 16),  // lane 0: 31 & 15 = 15
                                 x),
           out);
  CHECK(out[0] == 15);
  CHECK(out[15] == 0);
  float low[8];
  std::memcpy(low, &x, sizeof low);
  const __m256 half = _mm512_castps512_ps256(x);
  float half_lanes[8];
  std::memcpy(half_lanes, &half, sizeof half_lanes);
  CHECK(std::memcmp(half_lanes, low, sizeof low) == 0);

  uint64_t quads[4] = {1, 2, 3, 4}, whole[8];
  __m256i q;
  std::memcpy(&q, quads, sizeof q);
  lanes_of(_mm512_maskz_inserti64x4(0xFF, _mm512_set1_epi32(-1), q, 1), whole);
  CHECK((whole[0] == ~uint64_t{0} && whole[3] == ~uint64_t{0} && whole[4] == 1 && whole[7] == 4));
  lanes_of(_mm512_maskz_inserti64x4(0x0F, _mm512_set1_epi32(-1), q, 1), whole);
  CHECK((whole[0] == ~uint64_t{0} && whole[4] == 0 && whole[7] == 0));  // masked lanes zeroed
  lanes_of(_mm512_maskz_inserti64x4(0xFE, _mm512_set1_epi32(-1), q, 0), whole);
  CHECK((whole[0] == 0 && whole[1] == 2 && whole[3] == 4 && whole[4] == ~uint64_t{0}));

  int8_t bytes[16];
  for (int i = 0; i < 16; ++i) bytes[i] = static_cast<int8_t>(i * 17 - 128);  // -128 .. 127
  __m128i codes;
  std::memcpy(&codes, bytes, sizeof codes);
  int32_t words[16];
  lanes_of(_mm512_cvtepi8_epi32(codes), words);
  CHECK((words[0] == -128 && words[15] == 127 && words[7] == -9));
  lanes_of(_mm512_cvtepu8_epi32(codes), words);
  CHECK((words[0] == 128 && words[15] == 127 && words[7] == 247));
}

TEST_CASE("emulated scalef, rounding and the reduction", "[simd][emulation]") {
  float p[16], t[16];
  for (int i = 0; i < 16; ++i) p[i] = 1.5f, t[i] = 0.0f;
  t[0] = 3.7f;     // 1.5 x 2^3
  t[1] = -0.5f;    // 1.5 x 2^-1
  t[2] = -1e9f;    // underflows to 0
  t[3] = 1e9f;     // overflows to infinity
  t[4] = -149.0f;  // 1.5 x 2^-149 rounds to the smallest denormal's double, 2^-148
  float out[16];
  lanes_of(_mm512_scalef_ps(from_floats(p), from_floats(t)), out);
  CHECK(out[0] == 12.0f);
  CHECK(out[1] == 0.75f);
  CHECK(out[2] == 0.0f);
  CHECK(std::isinf(out[3]));
  CHECK(out[4] == std::ldexp(1.0f, -148));
  lanes_of(_mm512_roundscale_ps(from_floats(t), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), out);
  CHECK(out[0] == 3.0f);
  CHECK(out[1] == -1.0f);
  // GCC's order: lanes i and i + 8, then i and i + 4, then i and i + 2, then the two.
  float x[16] = {};
  x[0] = 1e8f, x[8] = -1e8f, x[1] = 1.0f;
  CHECK(_mm512_reduce_add_ps(from_floats(x)) == 1.0f);
  // A rounded product is not fused with the addition after it.
  float big[16], scale[16], shift[16];
  for (int i = 0; i < 16; ++i)
    big[i] = 1.0f + std::ldexp(1.0f, -12), scale[i] = big[i], shift[i] = -(big[i] * big[i]);
  const __m512 rounded = _mm512_mul_round_ps(from_floats(big), from_floats(scale),
                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  lanes_of(_mm512_add_ps(rounded, from_floats(shift)), out);
  CHECK(out[0] == 0.0f);
}

TEST_CASE("emulated masked loads and stores touch only their lanes", "[simd][emulation]") {
  uint16_t source[16];
  for (int i = 0; i < 16; ++i) source[i] = static_cast<uint16_t>(i + 1);
  // Lanes 0-2 read from the last three elements: a mask past them would read out of bounds.
  uint16_t read[16];
  lanes_of(_mm256_maskz_loadu_epi16(0x0007, source + 13), read);
  CHECK(read[0] == 14);
  CHECK(read[2] == 16);
  CHECK(read[3] == 0);
  uint32_t destination[16];
  for (auto& d : destination) d = 7u;
  _mm512_mask_storeu_epi32(destination, 0x8001, _mm512_set1_epi32(9));
  CHECK(destination[0] == 9u);
  CHECK(destination[1] == 7u);
  CHECK(destination[15] == 9u);
}

}  // namespace
}  // namespace attnbench

#endif  // __x86_64__
