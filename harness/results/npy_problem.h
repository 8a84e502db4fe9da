// The problem `attnbench attend` runs on its .npy tensors: the Shape from Q, K and V's dimensions
// ([seq, d], [heads, seq, d] or [batch, heads, seq, d]) with the mask, score modifiers, KV cache,
// dtype and memory layout its flags name; the scale; and the shapes its outputs are written in,
// Q's rank kept. Each refusal is one std::runtime_error naming the flag or the tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/shape.h"
#include "harness/results/npy_io.h"

namespace attnbench {

// What the flags say about the problem beside the tensors, as given.
struct NpyProblemFlags {
  bool causal = false;
  std::string mask;               // empty: none, or causal with --causal
  std::vector<int64_t> doc_lens;  // for --mask documents
  std::string dtype;              // empty: the files' own (fp32, or fp16 for float16 files)
  // One cache length per sequence ("5,300,2"); absent: not ragged (given empty, refused).
  std::optional<std::string> kv_lens;
  // The axes table's attend flags given (--alibi, --softcap, --layout, --kv-cache, --kv-dtype:
  // axis_flags.h), by flag; "true" for a switch.
  std::map<std::string, std::string> axis_flags;
};

// The forward problem of Q, K and V under `flags`. Its dtype is the files' type, or --dtype,
// which rounds float32 inputs.
Shape npy_problem_shape(const NpyTensor& q, const NpyTensor& k, const NpyTensor& v,
                        const NpyProblemFlags& flags);

// --scale as the float32 that multiplies every score: NaN, Inf or a value float32 cannot hold
// would make every output NaN, so it is refused.
float checked_scale(double scale);

// An output of `s` whose last dimension is `last` (d_v for O, seq_kv for the weights), without
// the leading dimensions a Q of rank `rank` did not have.
std::vector<int64_t> output_shape(std::size_t rank, const Shape& s, int64_t last);

// dO (read from `path`) must have O's shape exactly, as the forward writes it for Q's rank.
void require_output_shape(const NpyTensor& dout, const std::string& path,
                          const std::vector<int64_t>& expected);

}  // namespace attnbench
