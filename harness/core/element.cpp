#include "harness/core/element.h"

#include <Eigen/Core>

namespace attnbench {

// Eigen's bfloat16 and half round to nearest even, keep NaN a NaN and handle fp16 subnormals
// and overflow to infinity; F16C instructions are used where the CPU has them.

uint16_t to_bf16_bits(float value) {
  return Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(value));
}

uint16_t to_fp16_bits(float value) { return Eigen::numext::bit_cast<uint16_t>(Eigen::half(value)); }

float from_fp16_bits(uint16_t bits) {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
}

float round_to(DType dtype, float value) {
  switch (dtype) {
    case DType::fp32: return value;
    case DType::bf16: return from_bf16_bits(to_bf16_bits(value));
    case DType::fp16: return from_fp16_bits(to_fp16_bits(value));
  }
  return value;
}

void widen_to_fp32(DType dtype, const void* source, float* destination, int64_t count) {
  for (int64_t i = 0; i < count; ++i) destination[i] = load_as_fp32(dtype, source, i);
}

void narrow_from_fp32(DType dtype, const float* source, void* destination, int64_t count) {
  for (int64_t i = 0; i < count; ++i) store_from_fp32(dtype, destination, i, source[i]);
}

}  // namespace attnbench
