// flash_cpu's forward and backward on emulated tiles (forward_tile_query_block.h and
// backward_tile_key_block.h on harness/simd/tile_emulation.h): the amx_bf16 path's packing, tile
// walk, masks, softmax and gradients on a CPU without AMX, so that tests hold them against the
// float64 oracle on any AVX512_BF16 host. Its products are scalar loops: it is for tests
// (ATTNBENCH_FLASH_CPU_ISA=amx_bf16_emulated), not for timing. Compile options: those of
// kernels_avx512_bf16.cpp (no AMX: nothing here may fault where AMX is absent).
#include "harness/simd/avx512.h"
#include "harness/simd/tile_emulation.h"
#include "variants/cpu/flash_cpu/backward_tile_key_block.h"

namespace attnbench::flash_cpu {

// The AVX-512 operations under a name of this object's own (see kernels_amx_bf16.cpp).
struct Avx512WithEmulatedTiles : simd::Avx512 {};

TileKernels amx_bf16_emulated_kernels() {
  return tile_path_kernels<Avx512WithEmulatedTiles, simd::TileEmulation<Avx512WithEmulatedTiles>>();
}

}  // namespace attnbench::flash_cpu
