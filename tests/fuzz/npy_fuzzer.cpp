// libFuzzer target: the .npy reader. Any bytes must either decode to a tensor whose element
// count matches its shape, or throw std::runtime_error naming the file; anything else is a
// finding. A decoded tensor is written back and read again to check the writer's header too.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "harness/results/npy_format.h"
#include "harness/results/npy_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  attnbench::NpyTensor tensor;
  try {
    tensor = attnbench::decode_npy(bytes, "fuzz.npy");
  } catch (const std::runtime_error&) {
    return 0;
  }
  std::size_t elements = 1;
  for (int64_t extent : tensor.shape) elements *= static_cast<std::size_t>(extent);
  if (elements != tensor.data.size()) std::abort();

  std::string rewritten = attnbench::make_npy_header(tensor.shape);
  rewritten.append(reinterpret_cast<const char*>(tensor.data.data()),
                   tensor.data.size() * sizeof(float));
  const attnbench::NpyTensor again = attnbench::decode_npy(rewritten, "rewritten.npy");
  if (again.shape != tensor.shape || again.data.size() != tensor.data.size()) std::abort();
  return 0;
}
