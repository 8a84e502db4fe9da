// A quantized KV cache: K and V stored as one-byte codes and fp32 scales instead of the case's
// dtype, the serving-side trade of accuracy for bytes read per decoded token.
//   int8      symmetric, one scale per (token, KV head) row: x = code * scale with
//             scale = max |x| / 127 over the row's d values (KIVI's and vLLM's per-token form).
//   fp8_e4m3  OCP FP8 E4M3 codes (1 sign, 4 exponent bits of bias 7, 3 mantissa bits; no
//             infinities, S.1111.111 is NaN, largest finite 448) with one scale per (sequence,
//             KV head): x = e4m3(code) * scale with scale = max |x| / 448 over the sequence's keys.
// The codes and the scales are what a variant reads; the oracle reads code * scale as fp32
// values, exactly the numbers a kernel that widens and multiplies in fp32 sees.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace attnbench {

// The element type of a case's K and V: the case's dtype (the default, no quantization), or one
// of the quantized forms above.
enum class KvDType { case_dtype, int8, fp8_e4m3 };

// "dtype", "int8", "fp8_e4m3": the names configs, ids and the CLI use.
const char* to_string(KvDType kv_dtype);

// Reads one of those names; nullopt with a one-line reason naming `text` in `error` otherwise.
std::optional<KvDType> parse_kv_dtype(const std::string& text, std::string* error = nullptr);

inline bool is_quantized(KvDType kv_dtype) { return kv_dtype != KvDType::case_dtype; }

// The bytes of one scale: fp32 whatever the case's dtype.
inline constexpr int64_t kv_scale_bytes = 4;

inline constexpr int int8_code_max = 127;
inline constexpr float fp8_e4m3_max = 448.0f;

// The value of an E4M3 code, by bit manipulation: the 7 magnitude bits placed at the top of an
// fp32 exponent and mantissa make 2^-120 times the value (the E4M3 subnormals become fp32
// subnormals, the same multiple), so one shift, one multiply by 2^120 and the sign bit decode
// every finite code, and compilers vectorise it. The NaN codes (0x7F, 0xFF) decode as +-480:
// the quantizer never writes them.
inline float fp8_e4m3_value(uint8_t code) {
  const uint32_t magnitude_bits = static_cast<uint32_t>(code & 0x7Fu) << 20;
  float magnitude;
  std::memcpy(&magnitude, &magnitude_bits, sizeof magnitude);
  const float value = magnitude * 0x1p120f;
  return (code & 0x80u) ? -value : value;
}

// The E4M3 code nearest `value` (ties to even mantissa), saturating to +-448; NaN is refused by
// the quantizer before it gets here and encodes as 0.
uint8_t fp8_e4m3_code(float value);

// The int8 code of `value` at `scale`: round(value / scale) (ties to even), clamped to
// [-127, 127] (symmetric: -128 is never written); 0 when scale is 0 (an all-zero row).
int8_t int8_code(float value, float scale);

}  // namespace attnbench
