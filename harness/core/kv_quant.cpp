#include "harness/core/kv_quant.h"

#include <algorithm>
#include <cmath>

namespace attnbench {

const char* to_string(KvDType kv_dtype) {
  switch (kv_dtype) {
    case KvDType::case_dtype: return "dtype";
    case KvDType::int8: return "int8";
    case KvDType::fp8_e4m3: return "fp8_e4m3";
  }
  return "unknown";
}

std::optional<KvDType> parse_kv_dtype(const std::string& text, std::string* error) {
  for (KvDType kv_dtype : {KvDType::case_dtype, KvDType::int8, KvDType::fp8_e4m3})
    if (text == to_string(kv_dtype)) return kv_dtype;
  if (error != nullptr)
    *error = "unknown kv_dtype '" + text + "' (expected dtype, int8 or fp8_e4m3)";
  return std::nullopt;
}

uint8_t fp8_e4m3_code(float value) {
  if (std::isnan(value)) return 0;
  const uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  const float magnitude = std::fabs(value);
  if (magnitude == 0.0f) return sign;
  // Codes are ordered like their magnitudes, so saturating is a clamp to the largest finite code.
  constexpr uint8_t largest = 0x7E;  // S.1111.110 = 1.75 * 2^8 = 448
  if (magnitude >= fp8_e4m3_max) return sign | largest;
  int exponent = 0;
  std::frexp(magnitude, &exponent);  // magnitude = f * 2^exponent, f in [0.5, 1)
  // Below the smallest normal 2^-6 the step is the subnormals' 2^-9; above it, 2^(e - 3) for a
  // value in [2^e, 2^(e+1)). nearbyint rounds ties to even in the default rounding mode.
  const int step_exponent = std::max(exponent - 1, -6) - 3;
  const long steps = std::lrint(std::ldexp(magnitude, -step_exponent));
  // steps counts the value in units of the step; the code is (e + 7) * 8 + mantissa for normals
  // and the steps themselves for subnormals, and a mantissa that rounds up to 8 carries into the
  // exponent field correctly, since both read as one ordered integer.
  const long code = step_exponent == -9 ? steps : (step_exponent + 3 + 7) * 8 + (steps - 8);
  return sign | static_cast<uint8_t>(std::min<long>(code, largest));
}

int8_t int8_code(float value, float scale) {
  if (scale == 0.0f) return 0;
  const long code = std::lrint(value / scale);
  return static_cast<int8_t>(std::clamp<long>(code, -int8_code_max, int8_code_max));
}

}  // namespace attnbench
