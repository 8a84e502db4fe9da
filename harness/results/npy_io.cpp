#include "harness/results/npy_io.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "harness/results/atomic_file.h"
#include "harness/results/npy_format.h"

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

NpyTensor load_npy(const std::string& path) {
  // A FIFO or a device would block or never end: only regular files are read.
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0)
    fail(path, fmt::format("cannot open: {}", std::strerror(errno)));
  if (!S_ISREG(status.st_mode)) fail(path, "cannot open: not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open");
  const auto file_size = static_cast<uint64_t>(status.st_size);

  try {
    // The header first, so its shape is checked against the file size before any allocation.
    std::string header_bytes(std::min<uint64_t>(file_size, 12), '\0');
    in.read(header_bytes.data(), static_cast<std::streamsize>(header_bytes.size()));
    const std::size_t header_size = npy_header_size(header_bytes);
    if (header_size > file_size) throw NpyFormatError("truncated header");
    const std::size_t already_read = header_bytes.size();
    header_bytes.resize(header_size);
    if (header_size > already_read) {
      in.read(header_bytes.data() + already_read,
              static_cast<std::streamsize>(header_size - already_read));
    }
    const NpyHeader header = parse_npy_header(header_bytes);
    if (file_size - header_size < static_cast<uint64_t>(header.data_bytes))
      fail(path, "truncated (fewer data bytes than its shape needs)");
    if (file_size - header_size > static_cast<uint64_t>(header.data_bytes))
      fail(path, "has bytes past the data its shape describes");

    NpyTensor tensor;
    tensor.shape = header.shape;
    tensor.stored = header.float16 ? DType::fp16 : DType::fp32;
    in.seekg(static_cast<std::streamoff>(header_size));
    if (header.fortran_order || header.float16) {
      std::string data(static_cast<std::size_t>(header.data_bytes), '\0');
      in.read(data.data(), static_cast<std::streamsize>(data.size()));
      tensor.data = decode_npy_data(header, data);
    } else {
      tensor.data.resize(static_cast<std::size_t>(header.elements));
      in.read(reinterpret_cast<char*>(tensor.data.data()),
              static_cast<std::streamsize>(header.data_bytes));
    }
    if (!in) fail(path, "truncated (the file shrank while it was read)");
    return tensor;
  } catch (const NpyFormatError& error) {
    fail(path, not_float32(error));
  }
}

void save_npy_float32(const std::string& path, const NpyTensor& tensor) {
  const std::string header = make_npy_header(tensor.shape);
  const std::string_view data(reinterpret_cast<const char*>(tensor.data.data()),
                              tensor.data.size() * sizeof(float));
  write_file_atomically(path, {header, data});
}

}  // namespace attnbench
