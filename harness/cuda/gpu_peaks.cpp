// The GPU's measured peaks, stored in every run's manifest so each result can be read as a fraction
// of what this very machine reaches: a large cuBLAS SGEMM in strict FP32, the same GEMM on TF32
// tensor cores, bf16 and fp16 GEMMs on tensor cores, and the device-to-device copy bandwidth.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "harness/cuda/cublas_library.h"
#include "harness/cuda/cuda_check.h"
#include "harness/cuda/device_buffer.h"
#include "harness/measure/gpu.h"

namespace attnbench {

namespace {

constexpr int kRepetitions = 5;

// Owners of the handles, so an exception part-way releases everything.
struct Stream {
  cudaStream_t stream = nullptr;
  Stream() { ATTNBENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)); }
  ~Stream() { static_cast<void>(cudaStreamDestroy(stream)); }
};
struct Event {
  cudaEvent_t event = nullptr;
  Event() { ATTNBENCH_CUDA_CHECK(cudaEventCreate(&event)); }
  ~Event() { static_cast<void>(cudaEventDestroy(event)); }
};
struct CublasHandle {
  cublasHandle_t handle = nullptr;
  CublasHandle() { ATTNBENCH_CUBLAS_CHECK(cublas_library().create(&handle)); }
  ~CublasHandle() { static_cast<void>(cublas_library().destroy(handle)); }
};

// Median milliseconds of `launch` on `stream`, after one untimed warm-up.
template <typename Launch>
double median_ms(cudaStream_t stream, Launch launch) {
  Event start, stop;
  launch();
  ATTNBENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> times;
  for (int i = 0; i < kRepetitions; ++i) {
    ATTNBENCH_CUDA_CHECK(cudaEventRecord(start.event, stream));
    launch();
    ATTNBENCH_CUDA_CHECK(cudaEventRecord(stop.event, stream));
    ATTNBENCH_CUDA_CHECK(cudaEventSynchronize(stop.event));
    float ms = 0;
    ATTNBENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event, stop.event));
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

GpuPeaks measure_gpu_peaks() {
  GpuPeaks peaks;
  if (!query_gpu().available) return peaks;

  // 8192^3 keeps every SM busy for milliseconds; fall back to 4096 on a small GPU.
  std::size_t free_bytes = 0, total_bytes = 0;
  ATTNBENCH_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const int n = free_bytes > (std::size_t{2} << 30) ? 8192 : 4096;
  const std::size_t matrix_bytes = std::size_t{4} * n * n;

  Stream stream;
  CublasHandle cublas;
  ATTNBENCH_CUBLAS_CHECK(cublas_library().set_stream(cublas.handle, stream.stream));
  DeviceBuffer a(matrix_bytes), b(matrix_bytes), c(matrix_bytes);
  // 0x3C bytes are the float 0.0115: finite, so no NaN or Inf slows anything down.
  ATTNBENCH_CUDA_CHECK(cudaMemsetAsync(a.get(), 0x3C, matrix_bytes, stream.stream));
  ATTNBENCH_CUDA_CHECK(cudaMemsetAsync(b.get(), 0x3C, matrix_bytes, stream.stream));

  const double gemm_flops = 2.0 * n * n * static_cast<double>(n);
  auto gemm_gflops = [&](cublasMath_t math) {
    ATTNBENCH_CUBLAS_CHECK(cublas_library().set_math_mode(cublas.handle, math));
    const float one = 1.0f, zero = 0.0f;
    const double ms = median_ms(stream.stream, [&] {
      ATTNBENCH_CUBLAS_CHECK(cublas_library().sgemm(cublas.handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n,
                                                    n, &one, a.get<float>(), n, b.get<float>(), n,
                                                    &zero, c.get<float>(), n));
    });
    return gemm_flops / (ms * 1e-3) / 1e9;
  };
  // Default math never uses TF32 for SGEMM unless asked: strict FP32 on the CUDA cores.
  peaks.sgemm_gflops = gemm_gflops(CUBLAS_DEFAULT_MATH);
  peaks.tf32_gemm_gflops = gemm_gflops(CUBLAS_TF32_TENSOR_OP_MATH);

  // bf16 and fp16 inputs with fp32 accumulation and fp32 output, as the cuBLAS attention
  // variants call it: the tensor-core peak of that dtype. The buffers are reread as 16-bit
  // elements (0x3C3C: 1.47 in bf16, 1.06 in fp16: finite).
  auto gemm_ex_gflops = [&](cudaDataType_t input_type) {
    ATTNBENCH_CUBLAS_CHECK(cublas_library().set_math_mode(cublas.handle, CUBLAS_DEFAULT_MATH));
    const float one = 1.0f, zero = 0.0f;
    const double ms = median_ms(stream.stream, [&] {
      ATTNBENCH_CUBLAS_CHECK(cublas_library().gemm_ex(
          cublas.handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.get(), input_type, n, b.get(),
          input_type, n, &zero, c.get(), CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    });
    return gemm_flops / (ms * 1e-3) / 1e9;
  };
  peaks.bf16_gemm_gflops = gemm_ex_gflops(CUDA_R_16BF);
  peaks.fp16_gemm_gflops = gemm_ex_gflops(CUDA_R_16F);

  // A copy reads and writes every byte: counted twice, like the kernels' minimum-bytes model
  // (inputs read once plus outputs written once).
  const double copy_ms = median_ms(stream.stream, [&] {
    ATTNBENCH_CUDA_CHECK(
        cudaMemcpyAsync(c.get(), a.get(), matrix_bytes, cudaMemcpyDeviceToDevice, stream.stream));
  });
  peaks.copy_gbps = 2.0 * static_cast<double>(matrix_bytes) / (copy_ms * 1e-3) / 1e9;
  return peaks;
}

}  // namespace attnbench
