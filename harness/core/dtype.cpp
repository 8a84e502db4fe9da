#include "harness/core/dtype.h"

namespace attnbench {

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::fp32: return "fp32";
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
  }
  return "unknown";
}

const char* to_string(Layout layout) { return layout == Layout::bhsd ? "bhsd" : "bshd"; }

const char* to_string(Device device) { return device == Device::cpu ? "cpu" : "cuda"; }

const char* to_string(Precision precision) {
  switch (precision) {
    case Precision::fp32: return "fp32";
    case Precision::tf32: return "tf32";
  }
  return "unknown";
}

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> all = {DType::fp32, DType::bf16, DType::fp16};
  return all;
}

const std::vector<Layout>& all_layouts() {
  static const std::vector<Layout> all = {Layout::bhsd, Layout::bshd};
  return all;
}

std::optional<DType> parse_dtype(const std::string& name) {
  for (DType dtype : all_dtypes())
    if (name == to_string(dtype)) return dtype;
  return std::nullopt;
}

std::optional<Layout> parse_layout(const std::string& name) {
  for (Layout layout : all_layouts())
    if (name == to_string(layout)) return layout;
  return std::nullopt;
}

double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::fp32: return 0x1p-24;
    case DType::fp16: return 0x1p-11;
    case DType::bf16: return 0x1p-8;
  }
  return 0;
}

}  // namespace attnbench
