// float32 .npy files for `attnbench attend`, read and written with xtensor's npy support. Every
// problem (missing file, wrong dtype, garbage, data cut short) is a one-line std::runtime_error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnbench {

struct NpyTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;  // row-major
};

NpyTensor load_npy_float32(const std::string& path);
void save_npy_float32(const std::string& path, const NpyTensor& tensor);

}  // namespace attnbench
