// An Executor puts a problem where a variant runs (host or GPU memory), runs it, times it there
// and brings the output back for the oracle. The sweep, the tests and `attend` drive every variant
// through one, so CPU and CUDA variants are measured the same way.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/core/host_tensors.h"
#include "harness/core/shape.h"
#include "harness/variant/variant.h"
#include "harness/variant/workspace.h"

namespace attnbench {

// Thrown when the device is left unusable (a sticky CUDA error: the context is lost). The sweep
// records the case as failed and stops cleanly, keeping every finished case; any other
// std::exception fails only its own case.
class DeviceLostError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Executor {
 public:
  virtual ~Executor() = default;

  // Stores the inputs where the variant runs, in inputs.shape's dtype and layout, and allocates
  // O (and the weights when asked); for a shape whose pass needs the backward, also dO (in the
  // dtype and layout) and dQ, dK, dV (fp32, in the layout).
  virtual void load(const HostTensors& inputs, bool with_weights) = 0;
  // The problem to hand to Variant::run, pointing at this executor's buffers.
  virtual Problem problem(float scale) const = 0;
  // Fills O (and weights, and dQ, dK, dV when loaded) with NaN, so an element the variant never
  // writes fails the oracle.
  virtual void poison_outputs() = 0;
  // One pass of problem.shape.pass, returned in milliseconds: wall clock on the host, CUDA events
  // on the GPU. fwd times run(); bwd runs run() untimed first, then times run_backward() alone;
  // fwd_bwd times the two together. Waits for the pass to finish.
  virtual double timed_run_ms(Variant& variant, const Problem& problem) = 0;
  // How many back-to-back passes the last timed_run_ms ran and averaged over (harness/measure/
  // sample_runs.h): its sample lasted that many times what it returned.
  virtual int64_t runs_per_sample() const { return 1; }
  // Copies O (and weights, when loaded with them) back to the host: O as fp32 values in bhsd
  // order, as the oracle reads it.
  virtual void fetch_outputs(std::vector<float>& o, std::vector<float>* weights) = 0;
  // Copies dQ, dK, dV back to the host as fp32 values in bhsd order (empty when the loaded shape's
  // pass has no backward).
  virtual void fetch_gradients(std::vector<float>& dq, std::vector<float>& dk,
                               std::vector<float>& dv) = 0;
  // Evicts the inputs from the last-level cache, for cold-cache timing.
  virtual void flush_cache() = 0;
  // The allocator the variant's prepare() must use.
  virtual Workspace& workspace() = 0;
  // Frees what load() stored, between cases: kept, a finished case's tensors counted as memory
  // in use against the next case (or the next input distribution of the same case) and skipped
  // it. A CUDA executor's device buffers are checked against the GPU's size, not what is free.
  virtual void release_tensors() {}
};

// The backward problem of `forward`, reading dO at `dout` (the dtype and layout of O) and writing
// the fp32 gradients at dq, dk, dv (the layout of Q, K and V): the executor's own buffers.
inline BackwardProblem backward_problem_of(const Problem& forward, const void* dout, float* dq,
                                           float* dk, float* dv) {
  const Shape& s = forward.shape;
  BackwardProblem problem;
  problem.shape = s;
  problem.scale = forward.scale;
  problem.tensors = forward.tensors;
  problem.stream = forward.stream;
  problem.dout = make_view("do", dout, s.dtype, s.layout, s.batch, s.heads, s.seq_q, s.d_v);
  problem.dq = make_view("dq", dq, DType::fp32, s.layout, s.batch, s.heads, s.seq_q, s.d_k);
  problem.dk = make_view("dk", dk, DType::fp32, s.layout, s.batch, s.kv_heads, s.seq_kv, s.d_k);
  problem.dv = make_view("dv", dv, DType::fp32, s.layout, s.batch, s.kv_heads, s.seq_kv, s.d_v);
  return problem;
}

// Throws std::runtime_error naming the reason when the device is unavailable (no GPU, or built
// without CUDA).
std::unique_ptr<Executor> make_executor(Device device);

// Whether variants of `device` can run on this machine; `reason` says why not.
bool device_available(Device device, std::string* reason = nullptr);

}  // namespace attnbench
