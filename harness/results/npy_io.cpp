#include "harness/results/npy_io.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xnpy.hpp>

namespace attnbench {

NpyTensor load_npy_float32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open", path));
  xt::xarray<float> array;
  try {
    array = xt::load_npy<float>(in);  // converts a Fortran-ordered file to row-major
  } catch (const std::exception& error) {
    throw std::runtime_error(fmt::format("{}: not a float32 .npy file ({})", path, error.what()));
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
