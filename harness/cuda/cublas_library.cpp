#include "harness/cuda/cublas_library.h"

#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace attnbench {
namespace {

// The library's soname (libcublas.so.<toolkit major>), found through the executable's run path
// like any linked library, then the file the build linked against, for a run path that lacks it.
constexpr const char* kCublasSoname = ATTNBENCH_CUBLAS_SONAME;
constexpr const char* kCublasBuildPath = ATTNBENCH_CUBLAS_BUILD_PATH;

// Unevaluated: each names the overload its alias stands for, or fails to compile.
static_assert(std::is_same_v<decltype(static_cast<CublasGemmEx>(&cublasGemmEx)), CublasGemmEx>);
static_assert(
    std::is_same_v<decltype(static_cast<CublasGemmStridedBatchedEx>(&cublasGemmStridedBatchedEx)),
                   CublasGemmStridedBatchedEx>);

std::mutex load_mutex;
std::atomic<const CublasLibrary*> loaded_library{nullptr};

void* open_cublas() {
  if (void* handle = dlopen(kCublasSoname, RTLD_NOW | RTLD_LOCAL)) return handle;
  const std::string by_name = dlerror();
  if (void* handle = dlopen(kCublasBuildPath, RTLD_NOW | RTLD_LOCAL)) return handle;
  throw std::runtime_error(std::string("cuBLAS could not be loaded: ") + by_name + "; " +
                           dlerror());
}

template <typename Function>
void resolve(void* handle, const char* symbol, Function& function) {
  function = reinterpret_cast<Function>(dlsym(handle, symbol));
  if (function == nullptr) {
    throw std::runtime_error(std::string("cuBLAS (") + kCublasSoname + ") has no " + symbol +
                             ": a toolkit older than the build's?");
  }
}

// cublas_v2.h maps most names to versioned symbols by macro (cublasCreate is cublasCreate_v2);
// stringizing after expansion looks up the symbol the header would have linked.
#define ATTNBENCH_SYMBOL_NAME(name) #name
#define ATTNBENCH_CUBLAS_SYMBOL(name) ATTNBENCH_SYMBOL_NAME(name)

const CublasLibrary* load_cublas() {
  void* handle = open_cublas();
  static CublasLibrary library;
  try {
    resolve(handle, ATTNBENCH_CUBLAS_SYMBOL(cublasCreate), library.create);
    resolve(handle, ATTNBENCH_CUBLAS_SYMBOL(cublasDestroy), library.destroy);
    resolve(handle, ATTNBENCH_CUBLAS_SYMBOL(cublasSetStream), library.set_stream);
    resolve(handle, ATTNBENCH_CUBLAS_SYMBOL(cublasSetWorkspace), library.set_workspace);
    resolve(handle, ATTNBENCH_CUBLAS_SYMBOL(cublasSetMathMode), library.set_math_mode);
    resolve(handle, ATTNBENCH_CUBLAS_SYMBOL(cublasSgemm), library.sgemm);
    resolve(handle, ATTNBENCH_CUBLAS_SYMBOL(cublasGemmEx), library.gemm_ex);
    resolve(handle, ATTNBENCH_CUBLAS_SYMBOL(cublasGemmStridedBatchedEx),
            library.gemm_strided_batched_ex);
    resolve(handle, ATTNBENCH_CUBLAS_SYMBOL(cublasGetStatusName), library.status_name);
    resolve(handle, ATTNBENCH_CUBLAS_SYMBOL(cublasGetStatusString), library.status_string);
  } catch (...) {
    dlclose(handle);
    throw;
  }
  // Never closed: handles and workspaces created through it live until the process ends.
  return &library;
}

#undef ATTNBENCH_CUBLAS_SYMBOL
#undef ATTNBENCH_SYMBOL_NAME

}  // namespace

const CublasLibrary& cublas_library() {
  if (const CublasLibrary* library = loaded_library.load(std::memory_order_acquire)) {
    return *library;
  }
  const std::lock_guard<std::mutex> lock(load_mutex);
  if (const CublasLibrary* library = loaded_library.load(std::memory_order_relaxed)) {
    return *library;
  }
  const CublasLibrary* library = load_cublas();
  loaded_library.store(library, std::memory_order_release);
  return *library;
}

bool cublas_library_loaded() { return loaded_library.load(std::memory_order_acquire) != nullptr; }

}  // namespace attnbench
