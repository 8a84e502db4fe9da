// One variant run once on tensors read from .npy files (`attnbench attend`): the inputs copied
// at the problem's dtype and KV cache layout and type, the forward (then the backward, for a
// problem whose pass needs it), and the results fetched back as float32 tensors, checked finite.
// Here, not in results/, because it builds and runs the variant. Each refusal (an unsupported
// problem, too little memory, a result that overflowed) is one std::runtime_error.
#pragma once

#include <optional>

#include "harness/core/shape.h"
#include "harness/results/npy_io.h"
#include "harness/variant/registry.h"

namespace attnbench {

// The tensors read from the files: Q, K and V, and dO for the backward (else empty).
struct NpyAttentionInputs {
  NpyTensor q, k, v, dout;
};

// The results in the shapes they are written in (O and the weights in Q's rank, each gradient
// in its input's): O, the weights when asked for, and dQ, dK, dV for the backward.
struct NpyAttentionResults {
  NpyTensor o, weights, dq, dk, dv;
};

// Refuses, with the one line run_npy_attention would give, a problem `registered` does not take
// or that cannot fit in memory: for `attend` to call from the files' headers, before their data
// is read (read first, 1.6 GB of inputs were in memory before a 12 GiB problem was refused).
void require_npy_attention_fits(const RegisteredVariant& registered, const Shape& shape,
                                bool with_weights);

// Runs `registered` once on `inputs` as `shape`, scores scaled by `scale` (absent: the default,
// 1/sqrt(d_k)), the weights fetched too when `with_weights`.
NpyAttentionResults run_npy_attention(const RegisteredVariant& registered, const Shape& shape,
                                      const NpyAttentionInputs& inputs, std::optional<float> scale,
                                      bool with_weights);

}  // namespace attnbench
