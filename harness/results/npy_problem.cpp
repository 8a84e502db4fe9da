#include "harness/results/npy_problem.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "harness/core/dtype.h"
#include "harness/core/kv_cache.h"
#include "harness/core/kv_quant.h"
#include "harness/core/mask.h"
#include "harness/plan/axis_flags.h"

namespace attnbench {

namespace {

using Dims = std::array<int64_t, 4>;

[[noreturn]] void refuse(const std::string& problem) { throw std::runtime_error(problem); }

// [seq, d], [heads, seq, d] or [batch, heads, seq, d] as (batch, heads, seq, d).
Dims as_four_dims(const NpyTensor& tensor, const std::string& name) {
  const auto& s = tensor.shape;
  if (s.size() < 2 || s.size() > 4) {
    refuse(
        fmt::format("{} has rank {}; expected [seq, d], [heads, seq, d] or [batch, heads, seq, d]",
                    name, s.size()));
  }
  Dims dims{1, 1, 1, 1};
  std::copy(s.begin(), s.end(), dims.begin() + (4 - s.size()));
  for (int64_t extent : dims) {
    if (extent <= 0) refuse(fmt::format("{} has an empty dimension", name));
  }
  return dims;
}

// --mask (or --causal) and --doc-lens as a mask spec. "documents" takes its count from the
// lengths; "documents:K" must agree with them.
MaskSpec mask_from(const NpyProblemFlags& flags) {
  if (flags.causal && !flags.mask.empty() && flags.mask != "causal")
    refuse(fmt::format("--causal and --mask {} disagree: give one", flags.mask));
  const std::string text = flags.mask.empty() ? (flags.causal ? "causal" : "none") : flags.mask;
  if (text == "documents" || text.rfind("documents:", 0) == 0) {
    if (flags.doc_lens.empty())
      refuse(fmt::format("--mask {} needs --doc-lens, e.g. --doc-lens 3,5,8", text));
    MaskSpec mask = MaskSpec::documents(flags.doc_lens);
    if (text != "documents") {
      std::string error;
      const auto given = parse_mask(text, &error);
      if (!given) refuse("--mask: " + error);
      if (given->length != mask.length) {
        refuse(fmt::format("--mask {} names {} documents but --doc-lens gives {}", text,
                           given->length, mask.length));
      }
    }
    return mask;
  }
  if (!flags.doc_lens.empty()) refuse("--doc-lens is only for --mask documents");
  std::string error;
  const auto mask = parse_mask(text, &error);
  if (!mask) refuse("--mask: " + error);
  return *mask;
}

// The ragged batch's cache lengths, one per sequence of Q's batch.
void set_kv_lens(Shape& s, const NpyProblemFlags& flags) {
  if (!flags.kv_lens) return;
  std::string error;
  const auto kv_lens = parse_kv_lens(*flags.kv_lens, &error);
  if (!kv_lens) refuse("--kv-lens: " + error);
  if (static_cast<int64_t>(kv_lens->size()) != s.batch)
    refuse(fmt::format("--kv-lens gives {} lengths but Q has batch {}", kv_lens->size(), s.batch));
  s.kv_lens = *kv_lens;
}

// K and V's dimensions against Q's (already in `s`) and each other's.
void require_matching_dims(const Shape& s, const Dims& kd, const Dims& vd) {
  if (kd[0] != s.batch || vd[0] != s.batch) refuse("Q, K and V must have the same batch size");
  if (vd[1] != kd[1]) refuse(fmt::format("K has {} heads but V has {}", kd[1], vd[1]));
  if (vd[2] != kd[2]) refuse(fmt::format("K has {} keys but V has {}", kd[2], vd[2]));
  if (kd[3] != s.d_k) refuse(fmt::format("Q has d_k {} but K has {}", s.d_k, kd[3]));
}

// The dtype the problem runs in: the files' own type, or --dtype, which rounds float32 inputs.
DType problem_dtype(const std::string& requested, const NpyTensor& q, const NpyTensor& k,
                    const NpyTensor& v) {
  if (q.stored != k.stored || q.stored != v.stored)
    refuse("Q, K and V must all be float32 or all float16");
  if (requested.empty()) return q.stored;
  const auto dtype = parse_dtype(requested);
  if (!dtype) refuse(fmt::format("--dtype {}: expected fp32, bf16 or fp16", requested));
  if (q.stored == DType::fp16 && *dtype != DType::fp16)
    refuse(fmt::format("--dtype {}: the inputs are float16 files", requested));
  return *dtype;
}

}  // namespace

Shape npy_problem_shape(const NpyTensor& q, const NpyTensor& k, const NpyTensor& v,
                        const NpyProblemFlags& flags) {
  if (q.shape.size() != k.shape.size() || q.shape.size() != v.shape.size())
    refuse("Q, K and V must have the same rank");
  const Dims qd = as_four_dims(q, "Q"), kd = as_four_dims(k, "K"), vd = as_four_dims(v, "V");
  Shape s;
  s.batch = qd[0];
  s.heads = qd[1];
  s.kv_heads = kd[1];
  s.seq_q = qd[2];
  s.seq_kv = kd[2];
  s.d_k = qd[3];
  s.d_v = vd[3];
  s.set_mask(mask_from(flags));
  // The layout, the score modifiers and the KV cache's storage, each read as a config reads it.
  s = with_axis_flags(s, flags.axis_flags);
  set_kv_lens(s, flags);
  require_matching_dims(s, kd, vd);
  if (const std::string problem = validate(s); !problem.empty()) refuse(problem);
  s.dtype = problem_dtype(flags.dtype, q, k, v);
  return s;
}

float checked_scale(double scale) {
  if (!std::isfinite(scale) || std::fabs(scale) > std::numeric_limits<float>::max())
    refuse(fmt::format("--scale {}: must be a finite float32 value", scale));
  return static_cast<float>(scale);
}

std::vector<int64_t> output_shape(std::size_t rank, const Shape& s, int64_t last) {
  const std::vector<int64_t> full{s.batch, s.heads, s.seq_q, last};
  return std::vector<int64_t>(full.end() - static_cast<std::ptrdiff_t>(rank), full.end());
}

void require_output_shape(const NpyTensor& dout, const std::string& path,
                          const std::vector<int64_t>& expected) {
  if (dout.shape == expected) return;
  refuse(fmt::format("--dout {}: shape [{}] but the output O is [{}]", path,
                     fmt::join(dout.shape, ", "), fmt::join(expected, ", ")));
}

}  // namespace attnbench
