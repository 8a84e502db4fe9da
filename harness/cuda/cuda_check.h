// Every CUDA runtime and cuBLAS call goes through one of these checks, so a failure becomes an
// exception that names the call, the file and line, and the library's own error string.
//
// Errors after which the CUDA context is unusable (an illegal address in a kernel, a launch
// failure, a device-side assert, ...) throw DeviceLostError: the sweep records the case as failed
// and stops cleanly, since every later CUDA call would fail the same way. Everything else throws
// std::runtime_error and fails only its own case.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

#include "harness/cuda/cublas_library.h"
#include "harness/measure/executor.h"

namespace attnbench {

// True for the "sticky" errors the CUDA documentation describes as leaving the process in an
// inconsistent state: any further CUDA work returns the same error.
inline bool is_sticky_cuda_error(cudaError_t error) {
  switch (error) {
    case cudaErrorECCUncorrectable:
    case cudaErrorContained:
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorContextIsDestroyed:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorExternalDevice: return true;
    default: return false;
  }
}

inline std::string cuda_error_message(cudaError_t error, const char* what, const char* file,
                                      int line) {
  return std::string(file) + ":" + std::to_string(line) + ": " + what +
         " failed: " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")";
}

inline void check_cuda(cudaError_t error, const char* what, const char* file, int line) {
  if (error == cudaSuccess) return;
  const std::string message = cuda_error_message(error, what, file, line);
  if (is_sticky_cuda_error(error)) throw DeviceLostError("device lost: " + message);
  throw std::runtime_error(message);
}

inline void check_cublas(cublasStatus_t status, const char* what, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const CublasLibrary& cublas = cublas_library();
  const std::string message = std::string(file) + ":" + std::to_string(line) + ": " + what +
                              " failed: " + cublas.status_name(status) + " (" +
                              cublas.status_string(status) + ")";
  // cuBLAS reports a kernel that faulted as an execution failure; the CUDA runtime knows whether
  // the fault took the context with it.
  if (status == CUBLAS_STATUS_EXECUTION_FAILED || status == CUBLAS_STATUS_INTERNAL_ERROR) {
    const cudaError_t pending = cudaPeekAtLastError();
    if (is_sticky_cuda_error(pending)) {
      throw DeviceLostError("device lost: " + message + "; " + cudaGetErrorName(pending));
    }
  }
  throw std::runtime_error(message);
}

}  // namespace attnbench

// Checks a cudaError_t-returning expression.
#define ATTNBENCH_CUDA_CHECK(expression) \
  ::attnbench::check_cuda((expression), #expression, __FILE__, __LINE__)

// Checks a cublasStatus_t-returning expression.
#define ATTNBENCH_CUBLAS_CHECK(expression) \
  ::attnbench::check_cublas((expression), #expression, __FILE__, __LINE__)

// After every kernel launch: a bad configuration fails here, at the launch that caused it.
#define ATTNBENCH_CUDA_CHECK_LAUNCH(kernel_name) \
  ::attnbench::check_cuda(cudaGetLastError(), "launch of " kernel_name, __FILE__, __LINE__)
