// flash_cpu's forward and backward on emulated tiles (forward_tile_query_block.h and
// backward_tile_key_block.h on harness/simd/tile_emulation.h): the amx_bf16 path's packing, tile
// walk, masks, softmax and gradients on a CPU without AMX, so that tests hold them against the
// float64 oracle on any x86-64 host with AVX2. Its products are scalar loops and its AVX-512
// instructions are emulated lane by lane (harness/simd/avx512_emulation.h): it is for tests
// (ATTNBENCH_FLASH_CPU_ISA=amx_bf16_emulated), not for timing. Compile options: AVX2's, with
// AVX-512 switched off whatever the build's -march (CMakeLists.txt), so nothing here may fault
// on a CPU with AVX2 alone.
// clang-format off
#include "harness/simd/avx512_emulation.h"  // first: the headers below find its names
// clang-format on
#include "harness/simd/avx512.h"
#include "harness/simd/tile_emulation.h"
#include "variants/cpu/flash_cpu/backward_tile_key_block.h"

namespace attnbench::flash_cpu {

// The (emulated) AVX-512 operations under a name of this object's own (see kernels_amx_bf16.cpp).
struct Avx512WithEmulatedTiles : simd::Avx512 {};

TileKernels amx_bf16_emulated_kernels() {
  return tile_path_kernels<Avx512WithEmulatedTiles, simd::TileEmulation<Avx512WithEmulatedTiles>>();
}

}  // namespace attnbench::flash_cpu
