// The entry points of flash_cpu's kernels, one set per SIMD path: each kernels_<isa>.cpp is
// compiled with that path's options and returns its own copies; only those of isas_built() exist
// in a binary (isa_choice.cpp picks one).
#pragma once

#include "variants/cpu/flash_cpu/backward_blocks.h"
#include "variants/cpu/flash_cpu/forward_blocks.h"

namespace attnbench::flash_cpu {

struct Kernels {
  BlockFunction query_block;   // the forward, per query block (forward_query_block.h)
  KeyBlockFunction key_block;  // the backward, per key block (backward_key_block.h)
};

Kernels scalar_kernels();
Kernels avx2_kernels();
Kernels avx512_kernels();
Kernels avx512_bf16_kernels();
Kernels neon_kernels();

}  // namespace attnbench::flash_cpu
