#include "harness/results/npy_io.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xnpy.hpp>

#include "harness/core/element.h"

namespace attnbench {

NpyTensor load_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open", path));
  // xtensor has no half type: a float16 file is read as its 16-bit patterns (the type check is
  // ours, on the header's descr) and widened. Assigning to an xarray converts a Fortran-ordered
  // file to row-major.
  xt::xarray<float> array;
  DType stored = DType::fp32;
  try {
    xt::detail::npy_file file = xt::detail::load_npy_file(in);
    if (file.m_typestring == "<f4") {
      array = std::move(file).cast<float>();
    } else if (file.m_typestring == "<f2") {
      const xt::xarray<uint16_t> bits = std::move(file).cast<uint16_t>(false);
      array = xt::xarray<float>::from_shape(bits.shape());
      std::transform(bits.begin(), bits.end(), array.begin(), from_fp16_bits);
      stored = DType::fp16;
    } else {
      throw std::runtime_error("dtype " + file.m_typestring + "; expected float32 or float16");
    }
  } catch (const std::exception& error) {
    throw std::runtime_error(
        fmt::format("{}: not a float32 or float16 .npy file ({})", path, error.what()));
  }
  // xtensor does not notice a data section cut short: the read just comes up short.
  if (in.fail())
    throw std::runtime_error(
        fmt::format("{}: truncated (fewer data bytes than its shape needs)", path));
  if (in.peek() != std::ifstream::traits_type::eof()) {
    throw std::runtime_error(fmt::format("{}: has bytes past the data its shape describes", path));
  }
  NpyTensor tensor;
  for (std::size_t extent : array.shape()) tensor.shape.push_back(static_cast<int64_t>(extent));
  tensor.data.assign(array.begin(), array.end());
  tensor.stored = stored;
  return tensor;
}

void save_npy_float32(const std::string& path, const NpyTensor& tensor) {
  std::vector<std::size_t> shape(tensor.shape.begin(), tensor.shape.end());
  const auto view = xt::adapt(tensor.data.data(), tensor.data.size(), xt::no_ownership(), shape);
  // Written next to the target and renamed, so a failed write never leaves a partial file.
  const std::string temporary = path + ".tmp";
  try {
    xt::dump_npy(temporary, view);
  } catch (const std::exception& error) {
    throw std::runtime_error(fmt::format("{}: cannot write ({})", path, error.what()));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw std::runtime_error(fmt::format("{}: cannot write", path));
  }
}

}  // namespace attnbench
