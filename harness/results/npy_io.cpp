#include "harness/results/npy_io.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "harness/core/element_types.h"
#include "harness/results/atomic_file.h"
#include "harness/results/npy_format.h"
#include "harness/results/regular_file.h"

namespace attnbench {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw std::runtime_error(fmt::format("{}: {}", path, problem));
}

std::string not_float32(const NpyFormatError& error) {
  return fmt::format("not a float32 or float16 .npy file ({})", error.what());
}

}  // namespace

NpyTensor decode_npy(std::string_view bytes, const std::string& name) {
  try {
    NpyTensor tensor;
    const NpyHeader header = parse_npy_header(bytes);
    tensor.shape = header.shape;
    tensor.data = decode_npy_data(header, bytes.substr(header.data_offset));
    tensor.stored = header.float16 ? DType::fp16 : DType::fp32;
    return tensor;
  } catch (const NpyFormatError& error) {
    fail(name, not_float32(error));
  }
}

namespace {

// The file at `path` checked as load_npy says; its data read only `with_data`.
NpyTensor read_npy(const std::string& path, bool with_data) {
  // A FIFO or a device would block or never end: only regular files are read. Their size is
  // bounded by the header's shape, which is checked against it before any allocation.
  const RegularFile file(path, std::numeric_limits<uint64_t>::max(), ".npy file");
  const uint64_t file_size = file.size();
  try {
    std::string header_bytes(std::min<uint64_t>(file_size, 12), '\0');
    file.read_at(0, header_bytes.data(), header_bytes.size());
    const std::size_t header_size = npy_header_size(header_bytes);
    if (header_size > file_size) throw NpyFormatError("truncated header");
    const std::size_t already_read = header_bytes.size();
    header_bytes.resize(header_size);
    if (header_size > already_read)
      file.read_at(already_read, header_bytes.data() + already_read, header_size - already_read);
    const NpyHeader header = parse_npy_header(header_bytes);
    if (file_size - header_size < static_cast<uint64_t>(header.data_bytes))
      fail(path, "truncated (fewer data bytes than its shape needs)");
    if (file_size - header_size > static_cast<uint64_t>(header.data_bytes))
      fail(path, "has bytes past the data its shape describes");

    NpyTensor tensor;
    tensor.shape = header.shape;
    tensor.stored = header.float16 ? DType::fp16 : DType::fp32;
    const auto data_bytes = static_cast<uint64_t>(header.data_bytes);
    if (!with_data) return tensor;
    if (header.fortran_order || header.float16) {
      std::string data(static_cast<std::size_t>(data_bytes), '\0');
      file.read_at(header_size, data.data(), data_bytes);
      tensor.data = decode_npy_data(header, data);
    } else {
      tensor.data.resize(static_cast<std::size_t>(header.elements));
      file.read_at(header_size, reinterpret_cast<char*>(tensor.data.data()), data_bytes);
    }
    return tensor;
  } catch (const NpyFormatError& error) {
    fail(path, not_float32(error));
  }
}

}  // namespace

NpyTensor load_npy(const std::string& path) { return read_npy(path, true); }

NpyTensor load_npy_header(const std::string& path) { return read_npy(path, false); }

void save_npy(const std::string& path, const NpyTensor& tensor) {
  save_npy_files({{path, &tensor}});
}

void save_npy_files(const std::vector<std::pair<std::string, const NpyTensor*>>& path_and_tensor) {
  std::vector<std::string> headers, narrowed;
  headers.reserve(path_and_tensor.size());  // the pieces below point into them
  narrowed.reserve(path_and_tensor.size());
  std::vector<PendingFile> files;
  for (const auto& [path, tensor] : path_and_tensor) {
    const bool float16 = tensor->stored == DType::fp16;
    headers.push_back(make_npy_header(tensor->shape, float16));
    std::string_view data(reinterpret_cast<const char*>(tensor->data.data()),
                          tensor->data.size() * sizeof(float));
    if (float16) {
      std::string bits(tensor->data.size() * sizeof(uint16_t), '\0');
      for (std::size_t i = 0; i < tensor->data.size(); ++i) {
        const uint16_t half = to_fp16_bits(tensor->data[i]);
        bits[2 * i] = static_cast<char>(half & 0xff);  // little-endian, as the header says
        bits[2 * i + 1] = static_cast<char>(half >> 8);
      }
      narrowed.push_back(std::move(bits));
      data = narrowed.back();
    }
    files.push_back(PendingFile{path, {headers.back(), data}});
  }
  write_files_atomically(files);
}

}  // namespace attnbench
