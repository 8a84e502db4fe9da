#include "harness/results/npy_values.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "harness/core/element_types.h"
#include "harness/measure/out_of_memory.h"

namespace attnbench {

namespace {

void require_finite(const NpyTensor& tensor, const std::string& name, const std::string& path) {
  const auto bad = std::find_if(tensor.data.begin(), tensor.data.end(),
                                [](float x) { return !std::isfinite(x); });
  if (bad != tensor.data.end()) {
    throw std::runtime_error(fmt::format("{} ({}): element {} is {}; inputs must be finite", name,
                                         path, bad - tensor.data.begin(), *bad));
  }
}

float largest_magnitude(const std::vector<float>& values) {
  float largest = 0;
  for (float x : values) largest = std::max(largest, std::fabs(x));
  return largest;
}

}  // namespace

NpyTensor load_finite_input(const char* name, const std::string& path) {
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  NpyTensor tensor =
      allocating(fmt::format("reading {} from {}", name, path),
                 error ? 0.0 : static_cast<double>(size), [&] { return load_npy(path); });
  require_finite(tensor, name, path);
  return tensor;
}

void require_finite_result(const std::vector<float>& values, const char* what, const NpyTensor& q,
                           const NpyTensor& k, const NpyTensor& v, const NpyTensor* dout) {
  const auto bad =
      std::find_if(values.begin(), values.end(), [](float x) { return !std::isfinite(x); });
  if (bad == values.end()) return;
  const std::string dout_magnitude =
      dout != nullptr ? fmt::format(", |dO| {:g}", largest_magnitude(dout->data)) : "";
  throw std::runtime_error(fmt::format(
      "{} has {} at element {}: the inputs are too large for float32 attention (largest |Q| "
      "{:g}, |K| {:g}, |V| {:g}{}); scale them down",
      what, *bad, bad - values.begin(), largest_magnitude(q.data), largest_magnitude(k.data),
      largest_magnitude(v.data), dout_magnitude));
}

std::string store_gradient(NpyTensor& gradient, const char* name, DType inputs_stored) {
  gradient.stored = inputs_stored;
  if (inputs_stored != DType::fp16) return "";
  const float largest = largest_magnitude(gradient.data);
  if (std::isfinite(round_to(DType::fp16, largest))) return "";
  gradient.stored = DType::fp32;
  return fmt::format("{} written as float32: its largest |value| {:g} is past float16's range",
                     name, largest);
}

}  // namespace attnbench
