// .npy files for `attnbench attend`, read and written through npy_format.h: float32 and float16
// in (float16 widened exactly), float32 out. Every
// problem (missing file, not a regular file, wrong dtype, garbage, a shape too large to count,
// data cut short, a full disk) is a one-line std::runtime_error naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/core/dtype.h"

namespace attnbench {

struct NpyTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;     // row-major
  DType stored = DType::fp32;  // the file's element type: fp32, or fp16
};

NpyTensor load_npy(const std::string& path);

// The same checks without reading the data: its shape and stored type, `data` empty (to size a
// problem before its inputs are read).
NpyTensor load_npy_header(const std::string& path);

// The same from a whole file's bytes (for the fuzzer and tests); `name` prefixes errors.
NpyTensor decode_npy(std::string_view bytes, const std::string& name);

// Writes through write_file_atomically(): `path` holds the whole array or is left as it was. The
// array is written at its `stored` type: float32, or float16 (rounded to nearest even; values
// beyond float16's range become infinities, as numpy's astype does).
void save_npy(const std::string& path, const NpyTensor& tensor);

// Several arrays that belong together: each file is written in full before any is renamed into
// place, so a failure leaves every one of them as it was.
void save_npy_files(const std::vector<std::pair<std::string, const NpyTensor*>>& path_and_tensor);

}  // namespace attnbench
