// The scalar SIMD path: one float per "vector", plain C++. It is the reference path and the
// fallback on every CPU; exp2 is the C library's, exact to the last bit.
// The operations every SIMD header provides (a kernel is written once against them):
//   V                      the vector type; kWidth floats per V; kRegisters vector registers
//   zero, broadcast        all lanes 0 / x
//   load, store            unaligned, kWidth floats
//   add, sub, mul, div, fmadd (a * b + c), max, min, abs
//   select_less(x, b, when_less, otherwise)   lane-wise x < b ? when_less : otherwise
//   zero_if_minus_infinity(x)                 -inf lanes -> 0
//   exp2(t)                                   2^t (exp2.h's polynomial on the vector paths)
//   widen_fp16(source, destination, count)    IEEE half to float
//   load_bf16(p), load_fp16(p)                kWidth bf16 / IEEE half values widened to floats
//   reduce_add(x)                             the sum of x's lanes
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "harness/core/element_types.h"

namespace attnbench::simd {

struct Scalar {
  using V = float;
  static constexpr int kWidth = 1;
  static constexpr int kRegisters = 32;  // what the kernels may keep live: the compiler's problem
  static V zero() { return 0.0f; }
  static V broadcast(float x) { return x; }
  static V load(const float* p) { return *p; }
  static void store(float* p, V x) { *p = x; }
  static V fmadd(V a, V b, V c) { return a * b + c; }
  static V mul(V a, V b) { return a * b; }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V max(V a, V b) { return a > b ? a : b; }
  static V min(V a, V b) { return a < b ? a : b; }
  static V div(V a, V b) { return a / b; }
  static V select_less(V x, V bound, V when_less, V otherwise) {
    return x < bound ? when_less : otherwise;
  }
  static V abs(V x) { return std::fabs(x); }
  static V zero_if_minus_infinity(V x) {
    return x == -std::numeric_limits<float>::infinity() ? 0.0f : x;
  }
  static V exp2(V t) { return std::exp2(t); }
  static void widen_fp16(const uint16_t* source, float* destination, int64_t count) {
    for (int64_t i = 0; i < count; ++i) destination[i] = from_fp16_bits(source[i]);
  }
  static V load_bf16(const uint16_t* p) { return from_bf16_bits(*p); }
  static V load_fp16(const uint16_t* p) { return from_fp16_bits(*p); }
  static float reduce_add(V x) { return x; }
};

}  // namespace attnbench::simd
