// .npy files for `attnbench attend`, read and written with xtensor's npy support: float32 and
// float16 in, float32 out. Every problem (missing file, wrong dtype, garbage, data cut short) is a
// one-line std::runtime_error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/core/dtype.h"

namespace attnbench {

struct NpyTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;     // row-major
  DType stored = DType::fp32;  // the file's element type: fp32, or fp16 (widened exactly)
};

// A float32 or float16 file (float16 values are widened to fp32 exactly).
NpyTensor load_npy(const std::string& path);
void save_npy_float32(const std::string& path, const NpyTensor& tensor);

}  // namespace attnbench
