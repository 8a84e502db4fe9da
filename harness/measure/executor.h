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
  // O (and the weights when asked).
  virtual void load(const HostTensors& inputs, bool with_weights) = 0;
  // The problem to hand to Variant::run, pointing at this executor's buffers.
  virtual Problem problem(float scale) const = 0;
  // Fills O (and weights) with NaN, so an element the variant never writes fails the oracle.
  virtual void poison_outputs() = 0;
  // One forward pass, returned in milliseconds: wall clock on the host, CUDA events on the GPU.
  // Waits for the pass to finish.
  virtual double timed_run_ms(Variant& variant, const Problem& problem) = 0;
  // How many back-to-back passes the last timed_run_ms ran and averaged over (harness/measure/
  // sample_runs.h): its sample lasted that many times what it returned.
  virtual int64_t runs_per_sample() const { return 1; }
  // Copies O (and weights, when loaded with them) back to the host: O as fp32 values in bhsd
  // order, as the oracle reads it.
  virtual void fetch_outputs(std::vector<float>& o, std::vector<float>* weights) = 0;
  // Evicts the inputs from the last-level cache, for cold-cache timing.
  virtual void flush_cache() = 0;
  // The allocator the variant's prepare() must use.
  virtual Workspace& workspace() = 0;
};

// Throws std::runtime_error naming the reason when the device is unavailable (no GPU, or built
// without CUDA).
std::unique_ptr<Executor> make_executor(Device device);

// Whether variants of `device` can run on this machine; `reason` says why not.
bool device_available(Device device, std::string* reason = nullptr);

}  // namespace attnbench
