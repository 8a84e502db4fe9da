// cuBLAS is opened on first use, not at start-up (cublas_library.h). Opening it needs no GPU, so
// this runs on every machine that builds the CUDA code: each entry point resolves, and the
// library answers for itself.
#include "harness/cuda/cublas_library.h"

#include <catch2/catch.hpp>
#include <string>

namespace attnbench {
namespace {

TEST_CASE("cublas_library opens cuBLAS and resolves every entry point", "[cuda][cublas]") {
  const CublasLibrary& library = cublas_library();
  CHECK(cublas_library_loaded());
  CHECK(library.create != nullptr);
  CHECK(library.destroy != nullptr);
  CHECK(library.set_stream != nullptr);
  CHECK(library.set_workspace != nullptr);
  CHECK(library.set_math_mode != nullptr);
  CHECK(library.sgemm != nullptr);
  CHECK(library.gemm_ex != nullptr);
  CHECK(library.gemm_strided_batched_ex != nullptr);
  REQUIRE(library.status_name != nullptr);
  REQUIRE(library.status_string != nullptr);
  // A call into the library: cuBLAS names its own status codes without a device.
  CHECK(std::string(library.status_name(CUBLAS_STATUS_INVALID_VALUE)) ==
        "CUBLAS_STATUS_INVALID_VALUE");
  CHECK(&cublas_library() == &library);
}

}  // namespace
}  // namespace attnbench
