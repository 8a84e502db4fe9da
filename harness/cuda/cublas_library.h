// cuBLAS, opened on first use instead of at start-up. Mapping libcublas (and the libcublasLt it
// pulls in) costs a process about 150 MB of resident memory and its initialisation, which every
// run of a CUDA build paid, CPU runs and machines without a GPU included, though only the cublas
// variants and the GPU peak check call it. Every cuBLAS call in the project goes through
// cublas_library(); the executable does not link cuBLAS.
#pragma once

#include <cublas_v2.h>

namespace attnbench {

// The two GEMMs taking a cublasComputeType_t (cublas_api.h overloads both, for C++ callers still
// passing a cudaDataType, so decltype cannot name them; cublas_library.cpp checks these match).
using CublasGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                        int, int, const void*, const void*, cudaDataType, int,
                                        const void*, cudaDataType, int, const void*, void*,
                                        cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using CublasGemmStridedBatchedEx = cublasStatus_t (*)(
    cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
    cudaDataType, int, long long int, const void*, cudaDataType, int, long long int, const void*,
    void*, cudaDataType, int, long long int, int, cublasComputeType_t, cublasGemmAlgo_t);

// The cuBLAS entry points the project calls, resolved from the loaded library. The types come
// from cublas_v2.h, so a signature that changes between toolkits fails to compile here.
struct CublasLibrary {
  decltype(&cublasCreate) create = nullptr;
  decltype(&cublasDestroy) destroy = nullptr;
  decltype(&cublasSetStream) set_stream = nullptr;
  decltype(&cublasSetWorkspace) set_workspace = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSgemm) sgemm = nullptr;
  CublasGemmEx gemm_ex = nullptr;
  CublasGemmStridedBatchedEx gemm_strided_batched_ex = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// Loads cuBLAS once per process (thread-safe) and returns its entry points. Throws
// std::runtime_error naming the library and the loader's reason when it cannot be opened or lacks
// a function; a later call tries again.
const CublasLibrary& cublas_library();

// True once cublas_library() has loaded the library in this process (for tests: a CPU-only run
// must never load it).
bool cublas_library_loaded();

}  // namespace attnbench
