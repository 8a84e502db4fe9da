#include "harness/core/element_types.h"

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

// One switch per call, not per element: the loops then are plain copies and conversions.
void widen_to_fp32(DType dtype, const void* source, float* destination, int64_t count) {
  const auto* bits = static_cast<const uint16_t*>(source);
  switch (dtype) {
    case DType::fp32: std::memcpy(destination, source, sizeof(float) * count); return;
    case DType::bf16:
      for (int64_t i = 0; i < count; ++i) destination[i] = from_bf16_bits(bits[i]);
      return;
    case DType::fp16:
      for (int64_t i = 0; i < count; ++i) destination[i] = from_fp16_bits(bits[i]);
      return;
  }
}

void narrow_from_fp32(DType dtype, const float* source, void* destination, int64_t count) {
  auto* bits = static_cast<uint16_t*>(destination);
  switch (dtype) {
    case DType::fp32: std::memcpy(destination, source, sizeof(float) * count); return;
    case DType::bf16:
      for (int64_t i = 0; i < count; ++i) bits[i] = to_bf16_bits(source[i]);
      return;
    case DType::fp16:
      for (int64_t i = 0; i < count; ++i) bits[i] = to_fp16_bits(source[i]);
      return;
  }
}

}  // namespace attnbench
