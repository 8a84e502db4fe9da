// Element types, memory layouts, devices and arithmetic precisions: the names every config,
// variant and record uses for them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attnbench {

// The storage type of Q, K, V and O. bf16 and fp16 values are held as their 16-bit patterns.
enum class DType { fp32, bf16, fp16 };

// Where (batch, head, row) of a tensor lives; the d dimension is always contiguous.
//   bhsd: [batch, heads, seq, d] (one head's rows are adjacent)
//   bshd: [batch, seq, heads, d] (FlashAttention's and most models' layout)
enum class Layout { bhsd, bshd };

enum class Device { cpu, cuda };

// The arithmetic a variant does on its inputs: products accumulated in fp32, or tf32
// tensor-core products that round fp32 inputs to 10 mantissa bits inside the variant. Narrow
// dtypes are a property of the tensors (DType), not of the arithmetic.
enum class Precision { fp32, tf32 };

const char* to_string(DType dtype);
const char* to_string(Layout layout);
const char* to_string(Device device);
const char* to_string(Precision precision);

std::optional<DType> parse_dtype(const std::string& name);
std::optional<Layout> parse_layout(const std::string& name);
std::optional<Device> parse_device(const std::string& name);
std::optional<Precision> parse_precision(const std::string& name);

const std::vector<DType>& all_dtypes();
const std::vector<Layout>& all_layouts();
const std::vector<Device>& all_devices();
const std::vector<Precision>& all_precisions();

inline int64_t element_bytes(DType dtype) { return dtype == DType::fp32 ? 4 : 2; }

// Half the distance from 1 to the next representable number: the largest relative error of
// rounding to nearest. fp32 2^-24, fp16 2^-11 (10 stored mantissa bits), bf16 2^-8 (7 bits).
double unit_roundoff(DType dtype);

}  // namespace attnbench
