// The values in the .npy tensors `attnbench attend` reads and writes: inputs must be finite,
// results that overflowed float32 are refused naming the inputs' largest magnitudes, and a
// float16 input's gradient is written in float16 only where float16 holds it. Each refusal is one
// std::runtime_error.
#pragma once

#include <string>
#include <vector>

#include "harness/core/dtype.h"
#include "harness/results/npy_io.h"

namespace attnbench {

// Reads the input `name` ("Q") from `path`: out of memory is one line naming it and the file's
// size (out_of_memory.h), and an element that is NaN or Inf is refused.
NpyTensor load_finite_input(const char* name, const std::string& path);

// Finite inputs near the float32 range overflow in the scores or the weighted sum (or, in the
// backward, in dP and the gradients): refuses `values` (`what`: "the output", "dQ") holding a
// NaN or Inf, naming the largest magnitude of every input that took part (dO's too, in the
// backward), instead of writing an array of NaN.
void require_finite_result(const std::vector<float>& values, const char* what, const NpyTensor& q,
                           const NpyTensor& k, const NpyTensor& v, const NpyTensor* dout = nullptr);

// A gradient of float16 inputs is written in float16 unless one of its values is past float16's
// range (a GQA group's dV sums its heads' and can outgrow every input): that one is written in
// float32 instead of holding inf, and the returned note says so ("" when float16 holds it).
// Sets gradient.stored accordingly; `name` is the gradient's ("dV").
std::string store_gradient(NpyTensor& gradient, const char* name, DType inputs_stored);

}  // namespace attnbench
