#include "harness/core/dtype.h"

#include "harness/core/named_values.h"

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

const std::vector<Device>& all_devices() {
  static const std::vector<Device> all = {Device::cpu, Device::cuda};
  return all;
}

const std::vector<Precision>& all_precisions() {
  static const std::vector<Precision> all = {Precision::fp32, Precision::tf32};
  return all;
}

std::optional<DType> parse_dtype(const std::string& name) {
  return value_named(all_dtypes(), name);
}

std::optional<Layout> parse_layout(const std::string& name) {
  return value_named(all_layouts(), name);
}

std::optional<Device> parse_device(const std::string& name) {
  return value_named(all_devices(), name);
}

std::optional<Precision> parse_precision(const std::string& name) {
  return value_named(all_precisions(), name);
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
