// Conversions between fp32 and the 16-bit element types, rounding to nearest even. The harness
// uses them to round inputs once and to read outputs back; variants use them in scalar code.
#pragma once

#include <cstdint>
#include <cstring>

#include "harness/core/dtype.h"

namespace attnbench {

uint16_t to_bf16_bits(float value);
// bf16 is the top half of an fp32: widening is a shift, inline so that loops over it vectorise.
inline float from_bf16_bits(uint16_t bits) {
  const uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &widened, sizeof value);
  return value;
}
uint16_t to_fp16_bits(float value);
float from_fp16_bits(uint16_t bits);

// `value` rounded to the nearest `dtype` value, as an fp32 number (every bf16 and fp16 value is
// exactly an fp32 one).
float round_to(DType dtype, float value);

// count elements of `dtype` at `source` widened to fp32, and back (rounding to nearest even).
void widen_to_fp32(DType dtype, const void* source, float* destination, int64_t count);
void narrow_from_fp32(DType dtype, const float* source, void* destination, int64_t count);

// Element `index` of an array of `dtype` at `data`, as fp32.
inline float load_as_fp32(DType dtype, const void* data, int64_t index) {
  switch (dtype) {
    case DType::fp32: return static_cast<const float*>(data)[index];
    case DType::bf16: return from_bf16_bits(static_cast<const uint16_t*>(data)[index]);
    case DType::fp16: return from_fp16_bits(static_cast<const uint16_t*>(data)[index]);
  }
  return 0;
}

inline void store_from_fp32(DType dtype, void* data, int64_t index, float value) {
  switch (dtype) {
    case DType::fp32: static_cast<float*>(data)[index] = value; break;
    case DType::bf16: static_cast<uint16_t*>(data)[index] = to_bf16_bits(value); break;
    case DType::fp16: static_cast<uint16_t*>(data)[index] = to_fp16_bits(value); break;
  }
}

// Element traits, one per dtype: the storage type and the conversions, so code written once as a
// template over E reads and writes any dtype (E::load widens to fp32, E::store rounds).
struct Fp32Element {
  using Storage = float;
  static constexpr DType dtype = DType::fp32;
  static float load(float value) { return value; }
  static float store(float value) { return value; }
};
struct Bf16Element {
  using Storage = uint16_t;
  static constexpr DType dtype = DType::bf16;
  static float load(uint16_t bits) { return from_bf16_bits(bits); }
  static uint16_t store(float value) { return to_bf16_bits(value); }
};
struct Fp16Element {
  using Storage = uint16_t;
  static constexpr DType dtype = DType::fp16;
  static float load(uint16_t bits) { return from_fp16_bits(bits); }
  static uint16_t store(float value) { return to_fp16_bits(value); }
};

// Calls function(E{}) with the element traits of `dtype`: the one place a runtime dtype becomes a
// template argument (as FlashAttention's static_switch.h does for head dimensions).
template <class Function>
decltype(auto) with_element_type(DType dtype, Function&& function) {
  switch (dtype) {
    case DType::bf16: return function(Bf16Element{});
    case DType::fp16: return function(Fp16Element{});
    case DType::fp32: break;
  }
  return function(Fp32Element{});
}

}  // namespace attnbench
