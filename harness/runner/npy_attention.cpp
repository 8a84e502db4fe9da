#include "harness/runner/npy_attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "harness/core/element_types.h"
#include "harness/core/host_tensors.h"
#include "harness/core/pass.h"
#include "harness/measure/attend_memory.h"
#include "harness/measure/checked_run.h"
#include "harness/measure/executor.h"
#include "harness/measure/kv_quantizer.h"
#include "harness/measure/out_of_memory.h"
#include "harness/measure/paged_cache.h"
#include "harness/results/npy_problem.h"
#include "harness/results/npy_values.h"

namespace attnbench {

namespace {

// Refuses a problem that cannot fit before the variant allocates its workspace for it.
void prepare_variant(Variant& variant, Executor& executor, const VariantInfo& info,
                     const Shape& shape, bool with_weights) {
  const std::size_t workspace = variant.workspace_bytes(shape);
  require_attend_memory(shape, info, workspace, with_weights,
                        variant.reserved_address_space(shape));
  allocating(fmt::format("allocating {}'s workspace", info.name), static_cast<double>(workspace),
             [&] { variant.prepare(shape, executor.workspace()); });
}

// Refuses an input value that rounds past the dtype's range (70000 in fp16, 3.4e38 in bf16): the
// variants would read inf, and each would turn it into a refusal of its own, a NaN or a finite
// wrong answer.
void require_finite_in(DType dtype, const NpyAttentionInputs& inputs, bool backward) {
  const std::pair<const char*, const NpyTensor*> tensors[] = {
      {"Q", &inputs.q},
      {"K", &inputs.k},
      {"V", &inputs.v},
      {"dO", backward ? &inputs.dout : nullptr}};
  for (const auto& [name, tensor] : tensors) {
    if (tensor == nullptr || tensor->stored == dtype) continue;
    const auto bad = std::find_if(tensor->data.begin(), tensor->data.end(),
                                  [&](float x) { return !std::isfinite(round_to(dtype, x)); });
    if (bad != tensor->data.end()) {
      throw std::runtime_error(fmt::format(
          "{} element {} ({:g}) rounds to {:g} in {}, past its range; scale the inputs down", name,
          bad - tensor->data.begin(), *bad, round_to(dtype, *bad), to_string(dtype)));
    }
  }
}

// Refuses Q and K whose products may pass float32's range before the scale applies, or once
// `scale` (times log2 e, as the variants that work in base 2 apply it) has (the backward's
// dP = dO V has no scale: a dO that large makes the gradients overflow, which the check of the
// results names). Variants that scale the scores after the product read such a score as inf,
// and not all of them could tell: three wrote finite, wrong rows (|Q|, |K| ~ 1e19 at --scale
// 1e-30); and a scale of 1e38 on inputs of 2 had been reported as inputs too large. The bound
// is Cauchy-Schwarz's, per (batch, KV head): the longest row of its query heads times its
// longest key row, in one pass, where the scores themselves would cost as much as the attention;
// it passes every q.k within float32 and refuses only rows whose norms' product is not.
void require_products_in_range(const Shape& shape, const NpyAttentionInputs& inputs,
                               std::optional<float> given_scale) {
  const float scale = given_scale ? *given_scale : default_scale(shape);
  // The files are [batch, heads, rows, d]: the longest row of heads [first, first + count).
  const auto longest_row = [](const NpyTensor& tensor, int64_t heads, int64_t rows, int64_t d,
                              int64_t batch, int64_t first, int64_t count) {
    double longest = 0;
    for (int64_t h = first; h < first + count; ++h)
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = tensor.data.data() + ((batch * heads + h) * rows + r) * d;
        double squares = 0;
        for (int64_t c = 0; c < d; ++c) squares += static_cast<double>(row[c]) * row[c];
        longest = std::max(longest, std::sqrt(squares));
      }
    return longest;
  };
  const int64_t group = shape.heads / shape.kv_heads;
  for (int64_t batch = 0; batch < shape.batch; ++batch)
    for (int64_t kv_head = 0; kv_head < shape.kv_heads; ++kv_head) {
      const double q_norm =
          longest_row(inputs.q, shape.heads, shape.seq_q, shape.d_k, batch, kv_head * group, group);
      const double k_norm =
          longest_row(inputs.k, shape.kv_heads, shape.seq_kv, shape.d_k, batch, kv_head, 1);
      const double bound = q_norm * k_norm;
      if (bound > static_cast<double>(std::numeric_limits<float>::max())) {
        throw std::runtime_error(fmt::format(
            "the inputs are too large for float32 attention: a product q.k in batch {}, KV head "
            "{} can reach {:.3g} (its longest rows' lengths {:.3g} and {:.3g}), past float32's "
            "range; scale them down",
            batch, kv_head, bound, q_norm, k_norm));
      }
      const double scaled = bound * std::fabs(static_cast<double>(scale)) * 1.4426950408889634;
      if (scaled > static_cast<double>(std::numeric_limits<float>::max())) {
        if (!given_scale) {  // 1/sqrt(d_k) times log2 e passes 1 where d_k <= 2: the inputs
          throw std::runtime_error(fmt::format(
              "the inputs are too large for float32 attention: a score (1/sqrt(d_k) times q.k) "
              "in batch {}, KV head {} can reach {:.3g}, past float32's range; scale them down",
              batch, kv_head, scaled));
        }
        throw std::runtime_error(fmt::format(
            "the scale {:g} is too large for these inputs: times a product q.k in batch {}, KV "
            "head {} (up to {:.3g}) it can reach {:.3g}, past float32's range; give a smaller "
            "--scale",
            scale, batch, kv_head, bound, scaled));
      }
    }
}

// The inputs as the executor loads them: laid out in pages for a paged cache, rounded to the
// problem's dtype where the files hold another, and K and V quantized for a quantized cache.
HostTensors host_inputs(const Shape& shape, const NpyAttentionInputs& inputs,
                        std::optional<float> scale, double bytes) {
  HostTensors host = allocating("copying the inputs", bytes, [&] {
    Shape contiguous = shape;
    contiguous.kv_cache = KvCacheSpec::contiguous();
    HostTensors files;
    files.shape = contiguous;
    files.q = inputs.q.data;
    files.k = inputs.k.data;
    files.v = inputs.v.data;
    files.dout = inputs.dout.data;
    // Laid out in pages before the call: the output is the files' attention whatever the layout.
    if (shape.kv_cache.is_paged()) {
      files.shape = shape;
      lay_out_paged(files, 0);
    }
    return files;
  });
  const bool backward = needs_backward(shape.pass);
  require_finite_in(shape.dtype, inputs, backward);
  require_products_in_range(shape, inputs, scale);
  if (shape.dtype != inputs.q.stored || (backward && shape.dtype != inputs.dout.stored)) {
    for (std::vector<float>* tensor : {&host.q, &host.k, &host.v, &host.dout})
      for (float& value : *tensor) value = round_to(shape.dtype, value);
  }
  // Quantized from the values the case's dtype holds, as a sweep's inputs are (inputs.cpp).
  quantize_kv_cache(host);
  return host;
}

// O (and the weights) fetched back, O checked finite; both in Q's rank.
void fetch_forward(Executor& executor, const Shape& shape, const NpyAttentionInputs& inputs,
                   bool with_weights, NpyAttentionResults& results) {
  const double weight_bytes = with_weights ? fp32_weights_bytes(shape) : 0.0;
  allocating(fmt::format("fetching the output{}", with_weights ? " and the weights" : ""),
             fp32_bytes(static_cast<double>(shape.o_elements())) + weight_bytes, [&] {
               executor.fetch_outputs(results.o.data,
                                      with_weights ? &results.weights.data : nullptr);
             });
  require_finite_result(results.o.data, "the output", inputs.q, inputs.k, inputs.v);
  const std::size_t rank = inputs.q.shape.size();
  results.o.shape = output_shape(rank, shape, shape.d_v);
  if (with_weights) results.weights.shape = output_shape(rank, shape, shape.seq_kv);
}

// dQ, dK and dV fetched back and checked finite, each in its input's shape.
void fetch_backward(Executor& executor, const NpyAttentionInputs& inputs, double bytes,
                    NpyAttentionResults& results) {
  allocating("fetching the gradients", bytes,
             [&] { executor.fetch_gradients(results.dq.data, results.dk.data, results.dv.data); });
  for (auto [gradient, name, file] :
       {std::tuple{&results.dq, "dQ", &inputs.q}, std::tuple{&results.dk, "dK", &inputs.k},
        std::tuple{&results.dv, "dV", &inputs.v}}) {
    require_finite_result(gradient->data, name, inputs.q, inputs.k, inputs.v, &inputs.dout);
    gradient->shape = file->shape;
  }
}

}  // namespace

void require_npy_attention_fits(const RegisteredVariant& registered, const Shape& shape,
                                bool with_weights) {
  if (const std::string reason = unsupported_reason(registered.info, shape, with_weights);
      !reason.empty()) {
    throw std::runtime_error(reason);
  }
  const auto variant = registered.make();
  require_attend_memory(shape, registered.info, variant->workspace_bytes(shape), with_weights,
                        variant->reserved_address_space(shape));
}

NpyAttentionResults run_npy_attention(const RegisteredVariant& registered, const Shape& shape,
                                      const NpyAttentionInputs& inputs, std::optional<float> scale,
                                      bool with_weights) {
  if (const std::string reason = unsupported_reason(registered.info, shape, with_weights);
      !reason.empty()) {
    throw std::runtime_error(reason);
  }
  auto executor = make_executor(registered.info.device);
  auto variant = registered.make();
  prepare_variant(*variant, *executor, registered.info, shape, with_weights);
  const double input_bytes = fp32_bytes(static_cast<double>(
      shape.q_elements() + shape.k_elements() + shape.v_elements() + inputs.dout.data.size()));
  const HostTensors host = host_inputs(shape, inputs, scale, input_bytes);
  const double weight_bytes = with_weights ? fp32_weights_bytes(shape) : 0.0;
  allocating(fmt::format("allocating the inputs and the output at {}{}", to_string(shape.dtype),
                         with_weights ? " and the weights" : ""),
             input_bytes + fp32_bytes(static_cast<double>(shape.o_elements())) + weight_bytes, [&] {
               executor->load(host, with_weights);
               executor->poison_outputs();
             });
  allocating(fmt::format("in {}'s run", registered.info.name), 0.0, [&] {
    executor->timed_run_ms(*variant, executor->problem(scale ? *scale : default_scale(shape)));
  });
  NpyAttentionResults results;
  fetch_forward(*executor, shape, inputs, with_weights, results);
  if (needs_backward(shape.pass)) fetch_backward(*executor, inputs, input_bytes, results);
  return results;
}

}  // namespace attnbench
