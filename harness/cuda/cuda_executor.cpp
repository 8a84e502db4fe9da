#include "harness/cuda/cuda_executor.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "harness/cuda/cuda_check.h"
#include "harness/measure/gpu.h"
#include "harness/measure/sample_runs.h"
#include "harness/measure/tensor_packing.h"
#include "harness/variant/kv_rows.h"

namespace attnbench {

namespace {

std::size_t float_bytes(int64_t elements) { return static_cast<std::size_t>(elements) * 4; }

std::size_t o_bytes(const Shape& s) {
  return static_cast<std::size_t>(s.o_elements() * element_bytes(s.dtype));
}

template <class Bytes>
void upload(DeviceBuffer& buffer, const Bytes& host, cudaStream_t stream) {
  buffer.reserve(host.size());
  ATTNBENCH_CUDA_CHECK(
      cudaMemcpyAsync(buffer.get(), host.data(), host.size(), cudaMemcpyHostToDevice, stream));
}

// A vector of int32 (the block table, kv_lens) as bytes to upload.
std::vector<std::byte> int32_bytes(const std::vector<int32_t>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(int32_t));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
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
  const PackedInputs packed = pack_inputs(inputs);
  upload(q_, packed.q, stream_);
  upload(k_, packed.k, stream_);
  upload(v_, packed.v, stream_);
  // Serving: the block table and each sequence's length, read by the kernels on the device.
  if (s.kv_cache.is_paged()) upload(block_table_, int32_bytes(inputs.block_table), stream_);
  if (!s.kv_lens.empty())
    upload(kv_lens_, int32_bytes(std::vector<int32_t>(s.kv_lens.begin(), s.kv_lens.end())),
           stream_);
  o_.reserve(o_bytes(s));
  if (with_weights) weights_.reserve(float_bytes(s.weight_elements()));
  // Held until the synchronize below, as `packed` is: the copy reads it asynchronously.
  const HostBuffer dout = needs_backward(s.pass) ? pack_tensor(inputs.dout, s.dtype, s.layout,
                                                               s.batch, s.heads, s.seq_q, s.d_v)
                                                 : HostBuffer{};
  if (needs_backward(s.pass)) {
    upload(dout_, dout, stream_);
    dq_.reserve(float_bytes(s.q_elements()));
    dk_.reserve(float_bytes(s.k_elements()));
    dv_.reserve(float_bytes(s.v_elements()));
  }
  // The copies read pageable host memory that the caller may free once we return.
  ATTNBENCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
  shape_ = s;
  runs_per_sample_.clear();  // new inputs, perhaps another size: every count is chosen again
  with_weights_ = with_weights;
  loaded_ = true;
}

Problem CudaExecutor::problem(float scale) const {
  if (!loaded_) throw std::runtime_error("CudaExecutor::problem called before load");
  Problem problem;
  problem.shape = shape_;
  problem.scale = scale;
  problem.tensors = make_views(shape_, q_.get(), k_.get(), v_.get(), o_.get());
  problem.weights = with_weights_ ? weights_.get<float>() : nullptr;
  problem.stream = stream_;
  problem.pages = page_table_of(shape_, block_table_.get<int32_t>());
  problem.kv_lens_device = shape_.kv_lens.empty() ? nullptr : kv_lens_.get<int32_t>();
  return problem;
}

void CudaExecutor::poison_outputs() {
  if (!loaded_) throw std::runtime_error("CudaExecutor::poison_outputs called before load");
  // Every byte 0xFF makes every float a NaN (exponent all ones, mantissa non-zero).
  ATTNBENCH_CUDA_CHECK(cudaMemsetAsync(o_.get(), 0xFF, o_bytes(shape_), stream_));
  if (with_weights_) {
    ATTNBENCH_CUDA_CHECK(
        cudaMemsetAsync(weights_.get(), 0xFF, float_bytes(shape_.weight_elements()), stream_));
  }
  if (needs_backward(shape_.pass)) {
    const Shape& s = shape_;
    ATTNBENCH_CUDA_CHECK(cudaMemsetAsync(dq_.get(), 0xFF, float_bytes(s.q_elements()), stream_));
    ATTNBENCH_CUDA_CHECK(cudaMemsetAsync(dk_.get(), 0xFF, float_bytes(s.k_elements()), stream_));
    ATTNBENCH_CUDA_CHECK(cudaMemsetAsync(dv_.get(), 0xFF, float_bytes(s.v_elements()), stream_));
  }
  ATTNBENCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

double CudaExecutor::timed_run_ms(Variant& variant, const Problem& problem) {
  if (flushed_) {
    flushed_ = false;
    last_runs_ = 1;
    return time_runs_ms(variant, problem, 1);
  }
  auto chosen = runs_per_sample_.find(&variant);
  if (chosen == runs_per_sample_.end()) {
    const double first_ms = time_runs_ms(variant, problem, 1);
    if (first_ms >= min_sample_ms) {  // a long pass is its own sample, and this one is done
      runs_per_sample_.emplace(&variant, 1);
      last_runs_ = 1;
      return first_ms;
    }
    // A short pass: the faster of two sets the count, as the first launch of a kernel can include
    // loading its module, which would make the pass look long and its samples too short.
    const double run_ms = std::min(first_ms, time_runs_ms(variant, problem, 1));
    chosen = runs_per_sample_.emplace(&variant, attnbench::runs_per_sample(run_ms)).first;
  }
  last_runs_ = chosen->second;
  return time_runs_ms(variant, problem, last_runs_) / static_cast<double>(last_runs_);
}

double CudaExecutor::time_runs_ms(Variant& variant, const Problem& problem, int64_t runs) {
  const Pass pass = problem.shape.pass;
  BackwardProblem backward;
  if (needs_backward(pass)) {
    backward = backward_problem_of(problem, dout_.get(), dq_.get<float>(), dk_.get<float>(),
                                   dv_.get<float>());
  }
  // bwd: the forward runs once, before the start event; the backwards queued after it each read
  // the same saved state, so back-to-back backwards time the backward alone.
  if (pass == Pass::bwd) variant.run(problem);
  ATTNBENCH_CUDA_CHECK(cudaEventRecord(start_, stream_));
  for (int64_t run = 0; run < runs; ++run) {
    if (pass != Pass::bwd) variant.run(problem);
    if (needs_backward(pass)) variant.run_backward(backward);
  }
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
  std::vector<std::byte> stored(o_bytes(shape_));
  ATTNBENCH_CUDA_CHECK(
      cudaMemcpyAsync(stored.data(), o_.get(), stored.size(), cudaMemcpyDeviceToHost, stream_));
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
  const Shape& s = shape_;
  unpack_tensor(stored.data(), s.dtype, s.layout, s.batch, s.heads, s.seq_q, s.d_v, o);
}

void CudaExecutor::fetch_gradients(std::vector<float>& dq, std::vector<float>& dk,
                                   std::vector<float>& dv) {
  const Shape& s = shape_;
  if (!loaded_ || !needs_backward(s.pass)) {
    dq.clear(), dk.clear(), dv.clear();
    return;
  }
  // Each gradient comes back as stored (fp32, the case's layout) and is unpacked to bhsd.
  const auto fetch = [&](const DeviceBuffer& buffer, int64_t heads, int64_t seq, int64_t dim,
                         std::vector<float>& out) {
    std::vector<float> stored(static_cast<std::size_t>(s.batch * heads * seq * dim));
    ATTNBENCH_CUDA_CHECK(cudaMemcpyAsync(stored.data(), buffer.get(), stored.size() * sizeof(float),
                                         cudaMemcpyDeviceToHost, stream_));
    ATTNBENCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
    unpack_tensor(stored.data(), DType::fp32, s.layout, s.batch, heads, seq, dim, out);
  };
  fetch(dq_, s.heads, s.seq_q, s.d_k, dq);
  fetch(dk_, s.kv_heads, s.seq_kv, s.d_k, dk);
  fetch(dv_, s.kv_heads, s.seq_kv, s.d_v, dv);
}

void CudaExecutor::flush_cache() {
  flushed_ = true;
  flush_buffer_.reserve(flush_bytes_);
  // Ordered on the stream before the next timed run's start event, so it is not timed.
  ATTNBENCH_CUDA_CHECK(cudaMemsetAsync(flush_buffer_.get(), static_cast<int>(++flush_count_ & 0xFF),
                                       flush_bytes_, stream_));
}

std::unique_ptr<Executor> make_cuda_executor() { return std::make_unique<CudaExecutor>(); }

}  // namespace attnbench
