// The entry points of flash_cpu's kernels on one SIMD path, the forward's, the backward's and the
// decode path's in one table: each kernels_<isa>.cpp is compiled with that path's options and fills
// its own; only those of isas_built() exist in a binary (isa_choice.cpp picks one). The amx_bf16
// path's tile kernels are a table of their own (TileKernels, tile_blocks.h): they run beside an
// ISA's, for the bf16 cases the tiles take.
#pragma once

#include "variants/cpu/flash_cpu/backward_blocks.h"
#include "variants/cpu/flash_cpu/decode_plan.h"
#include "variants/cpu/flash_cpu/forward_blocks.h"

namespace attnbench::flash_cpu {

struct Kernels {
  BlockFunction forward_query_block = nullptr;    // per query block (forward_query_block.h)
  KeyBlockFunction backward_key_block = nullptr;  // per key block (backward_key_block.h)
  DecodePieceFunction decode_piece = nullptr;     // per piece of the plan (decode_piece.h)
  DecodeMergeFunction decode_merge = nullptr;     // per split item, after every piece
};

Kernels scalar_kernels();
Kernels avx2_kernels();
Kernels avx512_kernels();
Kernels avx512_bf16_kernels();
Kernels avx512_bf16_emulated_kernels();  // the same on emulated AVX-512 (needs avx2), for tests
Kernels neon_kernels();

}  // namespace attnbench::flash_cpu
