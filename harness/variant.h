// The variant contract: what every attention implementation declares and does.
//
// A variant is one file under variants/cpu or variants/cuda that defines a class derived from
// Variant and registers it with ATTNBENCH_REGISTER_VARIANT(ClassName). The harness, the tests and
// the CLI find it by name; nothing else needs editing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "harness/shape.h"
#include "harness/workspace.h"

namespace attnbench {

enum class Device { cpu, cuda };

// The arithmetic a variant does; it decides the oracle's tolerance (see tolerance.h).
enum class Precision { fp32, tf32, bf16, fp16 };

const char* to_string(Device device);
const char* to_string(Precision precision);

struct Capabilities {
  bool causal = false;           // honours Shape::causal
  bool gqa = false;              // accepts kv_heads < heads
  bool returns_weights = false;  // can write the softmax weights when Problem::weights is set
  Precision precision = Precision::fp32;
  int64_t max_d = 0;  // largest d_k and d_v accepted; 0 means no limit
};

struct VariantInfo {
  std::string name;  // lower-case, stable: the key in configs, results and plots
  Device device = Device::cpu;
  std::string summary;  // one line
  Capabilities capabilities;
};

// One forward pass. Pointers are host memory for CPU variants, device memory for CUDA ones.
struct Problem {
  Shape shape;
  float scale = 1.0f;  // usually 1 / sqrt(d_k)
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* o = nullptr;
  float* weights = nullptr;  // optional; only set when the variant returns weights
  void* stream = nullptr;    // cudaStream_t for CUDA variants: launch everything on it
};

// One (batch, head) slice of a problem: the query head's Q, O and weights rows, and the K and V
// of the key/value head it reads (GQA). Every pointer addresses a row-major [seq, dim] matrix.
struct HeadTensors {
  const float* q;
  const float* k;
  const float* v;
  float* o;
  float* weights;  // null unless the problem asks for weights
};

inline HeadTensors head_tensors(const Problem& p, int64_t batch, int64_t head) {
  const Shape& s = p.shape;
  const int64_t query_head = batch * s.heads + head;
  const int64_t kv_head = batch * s.kv_heads + head / s.group_size();
  return {p.q + query_head * s.seq_q * s.d_k, p.k + kv_head * s.seq_kv * s.d_k,
          p.v + kv_head * s.seq_kv * s.d_v, p.o + query_head * s.seq_q * s.d_v,
          p.weights ? p.weights + query_head * s.seq_q * s.seq_kv : nullptr};
}

class Variant {
 public:
  virtual ~Variant() = default;

  virtual VariantInfo info() const = 0;

  // Bytes of scratch prepare() will take from the workspace for this shape (weights excluded:
  // they are the caller's buffer). Lets the harness skip a case that cannot fit, before trying.
  virtual std::size_t workspace_bytes(const Shape& shape) const = 0;

  // Allocations, plans and handles for `shape`; not timed. All scratch memory comes from
  // `workspace`, which outlives every run() that follows.
  virtual void prepare(const Shape& shape, Workspace& workspace) = 0;

  // The timed forward pass on a shape given to prepare(): allocates nothing. Throws
  // std::runtime_error with a one-line message on failure.
  virtual void run(const Problem& problem) = 0;
};

// Why `variant` cannot run `shape` (or with weights), or empty when it can.
std::string unsupported_reason(const VariantInfo& info, const Shape& shape, bool want_weights);

}  // namespace attnbench
