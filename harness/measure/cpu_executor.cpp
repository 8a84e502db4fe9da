#include "harness/measure/cpu_executor.h"

#include <chrono>
#include <limits>
#include <stdexcept>

#include "harness/measure/cache_eviction.h"
#include "harness/measure/gpu.h"
#include "harness/variant/kv_rows.h"

namespace attnbench {

void CpuExecutor::load(const HostTensors& inputs, bool with_weights) {
  shape_ = inputs.shape;
  inputs_ = pack_inputs(inputs);
  block_table_ = inputs.block_table;
  k_scales_ = inputs.quantized.k_scales;
  v_scales_ = inputs.quantized.v_scales;
  o_.assign(static_cast<std::size_t>(shape_.o_elements() * element_bytes(shape_.dtype)),
            std::byte{0});
  weights_.assign(with_weights ? static_cast<std::size_t>(inputs.shape.weight_elements()) : 0,
                  0.0f);
  const bool backward = needs_backward(shape_.pass);
  const Shape& s = shape_;
  dout_ = backward ? pack_tensor(inputs.dout, s.dtype, s.layout, s.batch, s.heads, s.seq_q, s.d_v)
                   : HostBuffer{};
  dq_.assign(backward ? static_cast<std::size_t>(s.q_elements()) : 0, 0.0f);
  dk_.assign(backward ? static_cast<std::size_t>(s.k_elements()) : 0, 0.0f);
  dv_.assign(backward ? static_cast<std::size_t>(s.v_elements()) : 0, 0.0f);
}

void CpuExecutor::release_tensors() {
  inputs_ = {};
  block_table_ = {};
  k_scales_ = {};
  v_scales_ = {};
  o_ = {};
  weights_ = {};
  dout_ = {};
  dq_ = {};
  dk_ = {};
  dv_ = {};
}

Problem CpuExecutor::problem(float scale) const {
  Problem problem;
  problem.shape = shape_;
  problem.scale = scale;
  problem.tensors = make_views(shape_, inputs_.q.data(), inputs_.k.data(), inputs_.v.data(),
                               const_cast<std::byte*>(o_.data()));
  problem.pages = page_table_of(shape_, block_table_.data());
  if (is_quantized(shape_.kv_dtype)) problem.kv_scales = {k_scales_.data(), v_scales_.data()};
  problem.weights = weights_.empty() ? nullptr : const_cast<float*>(weights_.data());
  return problem;
}

void CpuExecutor::poison_outputs() {
  // Every byte 0xFF is a NaN in each dtype (exponent all ones, mantissa non-zero).
  std::fill(o_.begin(), o_.end(), std::byte{0xFF});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::fill(weights_.begin(), weights_.end(), nan);
  for (HostArray<float>* gradient : {&dq_, &dk_, &dv_})
    std::fill(gradient->begin(), gradient->end(), nan);
}

double CpuExecutor::timed_run_ms(Variant& variant, const Problem& problem) {
  const Pass pass = problem.shape.pass;
  BackwardProblem backward;
  if (needs_backward(pass)) {
    backward = backward_problem_of(problem, dout_.data(), dq_.data(), dk_.data(), dv_.data());
  }
  // The backward reads what this forward leaves (O and what the variant keeps for it).
  if (pass == Pass::bwd) variant.run(problem);
  const auto start = std::chrono::steady_clock::now();
  if (pass != Pass::bwd) variant.run(problem);
  if (needs_backward(pass)) variant.run_backward(backward);
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(stop - start).count();
}

void CpuExecutor::fetch_outputs(std::vector<float>& o, std::vector<float>* weights) {
  const Shape& s = shape_;
  unpack_tensor(o_.data(), s.dtype, s.layout, s.batch, s.heads, s.seq_q, s.d_v, o);
  if (weights != nullptr) *weights = weights_;
}

void CpuExecutor::fetch_gradients(std::vector<float>& dq, std::vector<float>& dk,
                                  std::vector<float>& dv) {
  const Shape& s = shape_;
  if (!needs_backward(s.pass)) {
    dq.clear(), dk.clear(), dv.clear();
    return;
  }
  unpack_tensor(dq_.data(), DType::fp32, s.layout, s.batch, s.heads, s.seq_q, s.d_k, dq);
  unpack_tensor(dk_.data(), DType::fp32, s.layout, s.batch, s.kv_heads, s.seq_kv, s.d_k, dk);
  unpack_tensor(dv_.data(), DType::fp32, s.layout, s.batch, s.kv_heads, s.seq_kv, s.d_v, dv);
}

void CpuExecutor::flush_cache() {
  // Writing 64 MiB of other data evicts the variant's own buffers (its workspace) from a 32 MiB
  // last-level cache; the case's inputs and outputs are evicted line by line, from any size of
  // cache (a 2-core VM may share a 300 MiB L3 that 64 MiB leaves mostly untouched), and so are
  // the 64 MiB, whose dirty lines would otherwise be written back during the timed run.
  constexpr std::size_t flush_bytes = 64u << 20;
  if (flush_buffer_.size() != flush_bytes) flush_buffer_.assign(flush_bytes, 0);
  for (std::size_t i = 0; i < flush_bytes; i += 64) flush_buffer_[i] = static_cast<char>(i);
  const auto evict = [](const auto& buffer) {
    evict_from_caches(buffer.data(), buffer.size() * sizeof(buffer[0]));
  };
  evict(inputs_.q), evict(inputs_.k), evict(inputs_.v), evict(o_), evict(weights_);
  evict(dout_), evict(dq_), evict(dk_), evict(dv_), evict(k_scales_), evict(v_scales_);
  evict(block_table_), evict(flush_buffer_);
}

std::unique_ptr<Executor> make_executor(Device device) {
  if (device == Device::cpu) return std::make_unique<CpuExecutor>();
  std::string reason;
  if (!device_available(Device::cuda, &reason)) throw std::runtime_error(reason);
  return make_cuda_executor();
}

bool device_available(Device device, std::string* reason) {
  if (device == Device::cpu) return true;
  static const GpuInfo gpu = query_gpu();
  if (!gpu.available && reason != nullptr) *reason = "no GPU: " + gpu.unavailable_reason;
  return gpu.available;
}

}  // namespace attnbench
