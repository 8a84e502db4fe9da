#include "harness/cuda/cuda_executor.h"

#include <algorithm>
#include <stdexcept>

#include "harness/cuda/cuda_check.h"
#include "harness/gpu.h"

namespace attnbench {

namespace {

std::size_t float_bytes(int64_t elements) { return static_cast<std::size_t>(elements) * 4; }

void upload(DeviceBuffer& buffer, const std::vector<float>& host, int64_t elements,
            cudaStream_t stream) {
  if (static_cast<int64_t>(host.size()) != elements) {
    throw std::runtime_error("input tensor has " + std::to_string(host.size()) +
                             " elements, the shape needs " + std::to_string(elements));
  }
  buffer.reserve(float_bytes(elements));
  ATTNBENCH_CUDA_CHECK(cudaMemcpyAsync(buffer.get(), host.data(), float_bytes(elements),
                                       cudaMemcpyHostToDevice, stream));
}

}  // namespace

CudaExecutor::CudaExecutor() {
  ATTNBENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  ATTNBENCH_CUDA_CHECK(cudaEventCreate(&start_));
  ATTNBENCH_CUDA_CHECK(cudaEventCreate(&stop_));
  int device = 0, l2_bytes = 0;
  ATTNBENCH_CUDA_CHECK(cudaGetDevice(&device));
  ATTNBENCH_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
  // Twice the L2 (and never less than 64 MiB), so a full overwrite evicts everything it held.
  flush_bytes_ = std::max<std::size_t>(2 * static_cast<std::size_t>(l2_bytes), 64u << 20);
}

CudaExecutor::~CudaExecutor() {
  // Destructors never throw: errors here would only repeat one already reported.
  if (stream_ != nullptr) static_cast<void>(cudaStreamSynchronize(stream_));
  workspace_.release_all();
  if (start_ != nullptr) static_cast<void>(cudaEventDestroy(start_));
  if (stop_ != nullptr) static_cast<void>(cudaEventDestroy(stop_));
  if (stream_ != nullptr) static_cast<void>(cudaStreamDestroy(stream_));
  static_cast<void>(cudaGetLastError());
}

void CudaExecutor::load(const HostTensors& inputs, bool with_weights) {
  const Shape& s = inputs.shape;
  upload(q_, inputs.q, s.q_elements(), stream_);
  upload(k_, inputs.k, s.k_elements(), stream_);
  upload(v_, inputs.v, s.v_elements(), stream_);
  o_.reserve(float_bytes(s.o_elements()));
  if (with_weights) weights_.reserve(float_bytes(s.weight_elements()));
  // The copies read pageable host memory that the caller may free once we return.
  ATTNBENCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
  shape_ = s;
  with_weights_ = with_weights;
  loaded_ = true;
}

Problem CudaExecutor::problem(float scale) const {
  if (!loaded_) throw std::runtime_error("CudaExecutor::problem called before load");
  Problem problem;
  problem.shape = shape_;
  problem.scale = scale;
  problem.q = q_.get<const float>();
  problem.k = k_.get<const float>();
  problem.v = v_.get<const float>();
  problem.o = o_.get<float>();
  problem.weights = with_weights_ ? weights_.get<float>() : nullptr;
  problem.stream = stream_;
  return problem;
}

void CudaExecutor::poison_outputs() {
  if (!loaded_) throw std::runtime_error("CudaExecutor::poison_outputs called before load");
  // Every byte 0xFF makes every float a NaN (exponent all ones, mantissa non-zero).
  ATTNBENCH_CUDA_CHECK(cudaMemsetAsync(o_.get(), 0xFF, float_bytes(shape_.o_elements()), stream_));
  if (with_weights_) {
    ATTNBENCH_CUDA_CHECK(
        cudaMemsetAsync(weights_.get(), 0xFF, float_bytes(shape_.weight_elements()), stream_));
  }
  ATTNBENCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

double CudaExecutor::timed_run_ms(Variant& variant, const Problem& problem) {
  ATTNBENCH_CUDA_CHECK(cudaEventRecord(start_, stream_));
  variant.run(problem);
  ATTNBENCH_CUDA_CHECK(cudaEventRecord(stop_, stream_));
  ATTNBENCH_CUDA_CHECK(cudaEventSynchronize(stop_));
  // A launch error the variant did not check would otherwise surface in an unrelated later call.
  ATTNBENCH_CUDA_CHECK(cudaGetLastError());
  float milliseconds = 0;
  ATTNBENCH_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, start_, stop_));
  return milliseconds;
}

void CudaExecutor::fetch_outputs(std::vector<float>& o, std::vector<float>* weights) {
  if (!loaded_) throw std::runtime_error("CudaExecutor::fetch_outputs called before load");
  o.resize(static_cast<std::size_t>(shape_.o_elements()));
  ATTNBENCH_CUDA_CHECK(cudaMemcpyAsync(o.data(), o_.get(), float_bytes(shape_.o_elements()),
                                       cudaMemcpyDeviceToHost, stream_));
  if (weights != nullptr) {
    if (!with_weights_) {
      weights->clear();
    } else {
      weights->resize(static_cast<std::size_t>(shape_.weight_elements()));
      ATTNBENCH_CUDA_CHECK(cudaMemcpyAsync(weights->data(), weights_.get(),
                                           float_bytes(shape_.weight_elements()),
                                           cudaMemcpyDeviceToHost, stream_));
    }
  }
  ATTNBENCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaExecutor::flush_cache() {
  flush_buffer_.reserve(flush_bytes_);
  // Ordered on the stream before the next timed run's start event, so it is not timed.
  ATTNBENCH_CUDA_CHECK(cudaMemsetAsync(flush_buffer_.get(), static_cast<int>(++flush_count_ & 0xFF),
                                       flush_bytes_, stream_));
}

std::unique_ptr<Executor> make_cuda_executor() { return std::make_unique<CudaExecutor>(); }

}  // namespace attnbench
