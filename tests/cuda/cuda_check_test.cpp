// The CUDA error checks turn error codes into exceptions that say where and what: ordinary errors
// fail one case (std::runtime_error), errors that lose the context stop the sweep
// (DeviceLostError). Error codes are passed in directly, so no GPU is needed.
#include "harness/cuda/cuda_check.h"

#include <catch2/catch.hpp>
#include <string>
#include <type_traits>

namespace attnbench {
namespace {

using Catch::Matchers::Contains;

// The message of the exception `call` throws, after checking its exact type.
template <typename Expected, typename Call>
std::string message_of(Call call) {
  try {
    call();
  } catch (const DeviceLostError& error) {
    if (std::is_same_v<Expected, DeviceLostError>) return error.what();
    FAIL("DeviceLostError thrown where a plain runtime_error was expected: " << error.what());
  } catch (const std::runtime_error& error) {
    if (std::is_same_v<Expected, std::runtime_error>) return error.what();
    FAIL("runtime_error thrown where DeviceLostError was expected: " << error.what());
  }
  FAIL("nothing thrown");
  return {};
}

TEST_CASE("success passes through", "[cuda][check]") {
  CHECK_NOTHROW(check_cuda(cudaSuccess, "cudaFoo()", "file.cu", 1));
  CHECK_NOTHROW(check_cublas(CUBLAS_STATUS_SUCCESS, "cublasFoo()", "file.cu", 1));
  CHECK_NOTHROW(ATTNBENCH_CUDA_CHECK(cudaSuccess));
}

TEST_CASE("an ordinary CUDA error throws runtime_error naming the call, place and error",
          "[cuda][check]") {
  const std::string message = message_of<std::runtime_error>(
      [] { check_cuda(cudaErrorInvalidValue, "cudaMemcpy(a, b, n, kind)", "copy.cu", 42); });
  CHECK_THAT(message, Contains("copy.cu:42"));
  CHECK_THAT(message, Contains("cudaMemcpy(a, b, n, kind)"));
  CHECK_THAT(message, Contains("cudaErrorInvalidValue"));
  CHECK_THAT(message, Contains("invalid argument"));

  const std::string from_macro =
      message_of<std::runtime_error>([] { ATTNBENCH_CUDA_CHECK(cudaErrorMemoryAllocation); });
  CHECK_THAT(from_macro, Contains("cuda_check_test.cpp:"));
  CHECK_THAT(from_macro, Contains("cudaErrorMemoryAllocation"));
}

TEST_CASE("sticky CUDA errors throw DeviceLostError", "[cuda][check]") {
  for (const cudaError_t error :
       {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorMisalignedAddress,
        cudaErrorAssert, cudaErrorIllegalInstruction, cudaErrorHardwareStackError}) {
    const std::string message =
        message_of<DeviceLostError>([&] { check_cuda(error, "kernel", "kernel.cu", 7); });
    CHECK_THAT(message, Contains(cudaGetErrorName(error)));
    CHECK_THAT(message, Contains("kernel.cu:7"));
    CHECK(is_sticky_cuda_error(error));
  }
  CHECK_FALSE(is_sticky_cuda_error(cudaErrorInvalidValue));
  CHECK_FALSE(is_sticky_cuda_error(cudaErrorMemoryAllocation));
  CHECK_FALSE(is_sticky_cuda_error(cudaErrorInvalidConfiguration));
  CHECK_FALSE(is_sticky_cuda_error(cudaErrorInsufficientDriver));
  CHECK_FALSE(is_sticky_cuda_error(cudaErrorNoDevice));
}

TEST_CASE("a launch check catches a launch error", "[cuda][check]") {
  // Without a GPU the runtime reports its own error here; with one, nothing is pending. Either
  // way the check must not crash and must say where it was.
  try {
    ATTNBENCH_CUDA_CHECK_LAUNCH("no_kernel");
  } catch (const std::runtime_error& error) {
    CHECK_THAT(std::string(error.what()), Contains("launch of no_kernel"));
  }
}

TEST_CASE("cuBLAS errors throw runtime_error with cuBLAS's own words", "[cuda][check]") {
  const std::string message = message_of<std::runtime_error>(
      [] { check_cublas(CUBLAS_STATUS_INVALID_VALUE, "cublasSgemm(...)", "gemm.cu", 9); });
  CHECK_THAT(message, Contains("gemm.cu:9"));
  CHECK_THAT(message, Contains("cublasSgemm(...)"));
  CHECK_THAT(message, Contains("CUBLAS_STATUS_INVALID_VALUE"));
  // An execution failure with no sticky CUDA error pending fails only its case.
  const std::string failed = message_of<std::runtime_error>(
      [] { ATTNBENCH_CUBLAS_CHECK(CUBLAS_STATUS_EXECUTION_FAILED); });
  CHECK_THAT(failed, Contains("CUBLAS_STATUS_EXECUTION_FAILED"));
}

}  // namespace
}  // namespace attnbench
