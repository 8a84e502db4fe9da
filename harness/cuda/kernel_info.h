// What the hand-written CUDA kernels (fused, flash_tc, chunked_cuda) declare alike, written once:
// on the GPU, causal and GQA, no weights, fp32 softmax and accumulation, d up to 128, and both
// layouts (they index through AttentionParams' strides). Each variant adds what is its own.
#pragma once

#include <string>
#include <utility>

#include "harness/variant/variant.h"

namespace attnbench {

// every_mask_and_modifier: every mask kind and both score modifiers, block-sparse (mask_math.h).
inline VariantInfo cuda_kernel_info(std::string name, std::string summary,
                                    bool every_mask_and_modifier) {
  VariantInfo info;
  info.name = std::move(name);
  info.device = Device::cuda;
  info.summary = std::move(summary);
  info.capabilities.causal = true;
  info.capabilities.gqa = true;
  info.capabilities.returns_weights = false;
  info.capabilities.layouts = all_layouts();
  info.capabilities.precision = Precision::fp32;
  info.capabilities.max_d = 128;
  if (every_mask_and_modifier) {
    info.capabilities.masks = all_mask_kinds();
    info.capabilities.alibi = true;
    info.capabilities.softcap = true;
  }
  return info;
}

}  // namespace attnbench
