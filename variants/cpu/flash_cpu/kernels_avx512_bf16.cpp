// flash_cpu's kernels (the forward's query blocks, the backward's key blocks and the decode path's
// pieces) on the AVX-512 SIMD path with bf16 products as vdpbf16ps (bf16_dot.h) when the job asks
// for them. Compile options: -mavx512f -mavx512vl -mavx512bw -mavx512bf16 -mavx2 -mfma -mf16c.
#include "variants/cpu/flash_cpu/backward_key_block.h"
#include "variants/cpu/flash_cpu/bf16_dot.h"
#include "variants/cpu/flash_cpu/decode_piece.h"
#include "variants/cpu/flash_cpu/forward_query_block.h"
#include "variants/cpu/flash_cpu/kernels.h"

namespace attnbench::flash_cpu {

Kernels avx512_bf16_kernels() {
  return {&attend_query_block<Bf16Dot::Ops, Bf16Dot>, &backward_key_block<Bf16Dot::Ops, Bf16Dot>,
          &attend_decode_piece<Bf16Dot::Ops, Bf16Dot>, &merge_decode_states<Bf16Dot::Ops>};
}

}  // namespace attnbench::flash_cpu
