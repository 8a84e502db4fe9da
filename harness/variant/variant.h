// The variant contract: what every attention implementation declares and does.
//
// A variant is one file under variants/cpu or variants/cuda that defines a class derived from
// Variant and registers it with ATTNBENCH_REGISTER_VARIANT(ClassName). The harness, the tests and
// the CLI find it by name; nothing else needs editing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/core/dtype.h"
#include "harness/core/shape.h"
#include "harness/core/tensor.h"
#include "harness/variant/workspace.h"

namespace attnbench {

struct Capabilities {
  bool causal = false;  // honours Shape::causal (the causal mask)
  // The other mask kinds the variant takes (window, prefix, documents; mask.h), each through
  // Shape::mask. A variant takes the mask none always, and causal when `causal` is set (or causal
  // is listed here); cases with any other mask are skipped with the reason.
  std::vector<MaskKind> masks{};
  // The score modifiers it applies (Shape::alibi, Shape::softcap), in the order mask.h gives.
  bool alibi = false;
  bool softcap = false;
  bool gqa = false;              // accepts kv_heads < heads
  bool returns_weights = false;  // can write the softmax weights when Problem::weights is set
  // Element types and layouts of Q, K, V and O the variant takes; other cases are skipped.
  std::vector<DType> dtypes{DType::fp32};
  std::vector<Layout> layouts{Layout::bhsd};
  // The arithmetic: fp32 accumulation (the oracle's tolerance then follows the dtype), or tf32.
  Precision precision = Precision::fp32;
  int64_t max_d = 0;  // largest d_k and d_v accepted; 0 means no limit
  // When not empty, the only values of d_k and d_v accepted (a kernel compiled for fixed head
  // dimensions, e.g. tensor-core tiles of 64 and 128); empty means any d up to max_d.
  std::vector<int64_t> head_dims;
  // Training: run_backward() gives dQ, dK, dV (cases of pass bwd and fwd_bwd need it).
  bool backward = false;
  // Serving: ragged batches (Shape::kv_lens) and paged K/V caches (Shape::kv_cache paged).
  bool ragged = false;
  bool paged_kv = false;
  // The quantized KV caches (Shape::kv_dtype, kv_quant.h) it reads: K and V as one-byte codes in
  // the case's layout (the views' kv_codes set) and Problem::kv_scales. Every variant reads the
  // case's dtype; cases of a kv_dtype not listed are skipped with the reason.
  std::vector<KvDType> kv_dtypes{};
};

struct VariantInfo {
  std::string name;  // lower-case, stable: the key in configs, results and plots
  Device device = Device::cpu;
  std::string summary;  // one line
  Capabilities capabilities;
};

// A paged cache's block table (Shape::kv_cache paged): keys [p * page_size, (p + 1) * page_size)
// of sequence b live in pool page block_table[b * pages_per_sequence + p]. The K and V views of
// such a problem are the page pools, read with the page as the batch index and the key's place in
// its page as the row: K row of key j of (b, kv head h) = k.row(block_table[...j / page_size],
// h, j % page_size). Entries past a sequence's last page are -1.
struct KvPageTable {
  const int32_t* block_table = nullptr;  // host memory for CPU variants, device memory for CUDA
  int64_t pages_per_sequence = 0;
  int64_t page_size = 0;
};

// The fp32 scales of a quantized cache (kv_quant.h), in the memory of the variant's device. The
// scale of K row `row` of stored batch `b` (the pool page of a paged cache, else the sequence)
// and KV head h is k[(b * kv_heads + h) * kv_stored_rows + row] for int8; fp8_e4m3 keeps one per
// (sequence, KV head), k[sequence * kv_heads + h]. The same for V. Read them through
// kv_scale_at() (kv_rows.h).
struct KvScales {
  const float* k = nullptr;
  const float* v = nullptr;
};

// One forward pass. Pointers are host memory for CPU variants, device memory for CUDA ones. Q, K,
// V and O are in shape.dtype and shape.layout; their views carry the strides.
struct Problem {
  Shape shape;
  float scale = 1.0f;  // usually 1 / sqrt(d_k)
  AttentionViews tensors;
  float* weights = nullptr;  // optional, fp32 bhsd; only set when the variant returns weights
  void* stream = nullptr;    // cudaStream_t for CUDA variants: launch everything on it
  KvPageTable pages;         // set when shape.kv_cache is paged
  // shape.kv_lens as int32, in device memory, for CUDA variants (null when not ragged); CPU
  // variants read shape.keys_of(b).
  const int32_t* kv_lens_device = nullptr;
  KvScales kv_scales;  // set when shape.kv_dtype is quantized

  // One (batch, query head) slice, with T the stored element type (float, or uint16_t for bf16
  // and fp16). Throws TensorAccessError for a T of another size or a batch or head out of range.
  template <class T>
  HeadView<T> head(int64_t batch, int64_t head) const {
    return head_view<T>(shape, tensors, weights, batch, head);
  }
};

// One backward pass: the gradients of the forward last run on the same prepared shape.
struct BackwardProblem {
  Shape shape;
  float scale = 1.0f;
  AttentionViews tensors;  // Q, K, V as the forward read them, O as it wrote it
  TensorView dout;         // dO: the shape, dtype and layout of O
  // The gradients written: fp32, in the case's layout, the shapes of Q, K and V (with GQA, dK and
  // dV sum over each group of query heads).
  TensorView dq, dk, dv;
  void* stream = nullptr;
};

class Variant {
 public:
  virtual ~Variant() = default;

  virtual VariantInfo info() const = 0;

  // Bytes of scratch prepare() will take from the workspace for this shape (weights excluded:
  // they are the caller's buffer). Lets the harness skip a case that cannot fit, before trying.
  virtual std::size_t workspace_bytes(const Shape& shape) const = 0;

  // Address space a library the variant calls maps for itself, beyond the workspace, without
  // necessarily touching it (OpenBLAS's per-thread buffers): checked against the mapping limits
  // (ulimit -v, ulimit -d) before a case runs, never recorded as workspace.
  virtual std::size_t reserved_address_space(const Shape& shape) const {
    (void)shape;
    return 0;
  }

  // Allocations, plans and handles for `shape`; not timed. All scratch memory comes from
  // `workspace`, which outlives every run() that follows.
  virtual void prepare(const Shape& shape, Workspace& workspace) = 0;

  // The code path chosen at run time for the prepared shape (e.g. "avx512_bf16"), recorded with
  // each case; empty for a variant with one path.
  virtual std::string code_path() const { return {}; }

  // The timed forward pass on a shape given to prepare(): allocates nothing. Throws
  // std::runtime_error with a one-line message on failure; inside an OpenMP region, through
  // ParallelErrors (parallel_errors.h), since an exception leaving the region aborts the program.
  virtual void run(const Problem& problem) = 0;

  // Training (Capabilities::backward). prepare() on a shape whose pass needs the backward
  // allocates, inside workspace_bytes(), what the forward keeps for it; this says how many of
  // those bytes that is (P, O(n^2), for a variant that keeps the weights; the per-row
  // log-sum-exp, O(n), for a flash one), recorded with each case.
  virtual std::size_t saved_for_backward_bytes(const Shape& shape) const {
    (void)shape;
    return 0;
  }
  // dQ, dK, dV for the forward run() last ran on this prepared shape; allocates nothing.
  virtual void run_backward(const BackwardProblem& problem);
};

// Whether the variant takes masks of `kind` (none always; causal through Capabilities::causal).
bool takes_mask(const Capabilities& capabilities, MaskKind kind);

// Why `variant` cannot run `shape` (or with weights), or empty when it can.
std::string unsupported_reason(const VariantInfo& info, const Shape& shape, bool want_weights);

// Throws std::runtime_error with unsupported_reason(info, shape, false) where there is one: the
// first line of every prepare(). The runner skips such a case before it prepares anything; a
// caller that goes straight to prepare() (a test, a tool of its own) is refused with the same
// reason, never answered by a kernel that ignores a mask, modifier, dtype or cache it does not
// implement.
void refuse_unsupported(const VariantInfo& info, const Shape& shape);

}  // namespace attnbench
