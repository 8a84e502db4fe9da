// The one vector exp2 every SIMD path shares: 2^t for -127 <= t < 128, to 1.8e-7 relative error.
// t = n + f with n = round(t), 2^f by a degree-5 polynomial fitted for relative error on
// |f| <= 1/2, and 2^n put straight into the exponent bits. Adding kRoundBias rounds t to an
// integer and leaves n + 127 in the low mantissa bits, ready to shift into the exponent field
// (Simd::pow2_of_biased). t is clamped at -127, where that field is 0 and 2^n exactly 0, so
// exp2(-inf) = 0. Cost: 11 vector operations.
#pragma once

namespace attnbench::simd {

constexpr float kExp2C5 = 1.3218672e-3f, kExp2C4 = 9.6716983e-3f, kExp2C3 = 5.5508930e-2f,
                kExp2C2 = 2.4022238e-1f, kExp2C1 = 6.9314688e-1f;
// 1.5 * 2^23 + 127: x + kRoundBias has round(x) + 127 in its low mantissa bits for |x| < 2^22.
constexpr float kRoundBias = 12583039.0f;

template <class Simd>
inline __attribute__((always_inline)) typename Simd::V exp2_polynomial(typename Simd::V t) {
  t = Simd::max(t, Simd::broadcast(-127.0f));
  const auto biased = Simd::add(t, Simd::broadcast(kRoundBias));
  const auto n = Simd::sub(biased, Simd::broadcast(kRoundBias));
  const auto f = Simd::sub(t, n);
  auto p = Simd::fmadd(Simd::broadcast(kExp2C5), f, Simd::broadcast(kExp2C4));
  p = Simd::fmadd(p, f, Simd::broadcast(kExp2C3));
  p = Simd::fmadd(p, f, Simd::broadcast(kExp2C2));
  p = Simd::fmadd(p, f, Simd::broadcast(kExp2C1));
  p = Simd::fmadd(p, f, Simd::broadcast(1.0f));
  return Simd::mul(p, Simd::pow2_of_biased(biased));
}

}  // namespace attnbench::simd
