// Run-time choices turned into template arguments, written once: the element type, the head-dim
// bucket, the rows per block and the score modifiers a CUDA kernel is instantiated for (the idea
// of flash-attention's static_switch.h). A launch site lists the values it has kernels for and
// receives each choice as a std::integral_constant, so `decltype(d)::value` is a template
// argument; a value with no kernel is a one-line error naming the variant, never a silent default.
//
// The mask kind is not among them: the kernels branch on it once per block and per partial tile
// (mask_math.h), so one instantiation serves every mask and the unmasked tiles pay nothing.
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>

#include "harness/core/dtype.h"

namespace attnbench::dispatch {

// Calls function(std::integral_constant<decltype(kChoice), kChoice>{}) for the one of kChoices
// equal to `value`; false, with nothing called, when none is.
template <auto... kChoices, class Value, class Function>
bool with_one_of(Value value, Function&& function) {
  return ((value == kChoices &&
           (function(std::integral_constant<decltype(kChoices), kChoices>{}), true)) ||
          ...);
}

// The d bucket (launch::d_bucket) among kBuckets, as a std::integral_constant<int, D>.
template <int... kBuckets, class Function>
void with_head_dim(int d_bucket, const char* variant, Function&& function) {
  if (!with_one_of<kBuckets...>(d_bucket, function)) {
    throw std::runtime_error(std::string(variant) + " has no kernel for head dimension bucket " +
                             std::to_string(d_bucket));
  }
}

// The element type among kDTypes, as a std::integral_constant<DType, kDType>.
template <DType... kDTypes, class Function>
void with_dtype(DType dtype, const char* variant, Function&& function) {
  if (!with_one_of<kDTypes...>(dtype, function)) {
    throw std::runtime_error(std::string(variant) + " does not take " + to_string(dtype) +
                             " tensors");
  }
}

// A flag (soft-capping or ALiBi on, say) as std::true_type or std::false_type.
template <class Function>
void with_flag(bool flag, Function&& function) {
  with_one_of<false, true>(flag, function);
}

}  // namespace attnbench::dispatch
