// flash_cpu's forward and backward on AMX tiles (forward_tile_query_block.h,
// backward_tile_key_block.h), the products as TDPBF16PS. Compile options: -mamx-tile -mamx-bf16
// -mavx512dq -mavx512f -mavx512vl -mavx512bw -mavx512bf16 -mavx2 -mfma -mf16c. Run only where
// CpuFeatures has amx_tile, amx_bf16 and avx512dq (isa_choice.cpp sees to it).
#include "harness/simd/amx_tiles.h"
#include "harness/simd/avx512.h"
#include "variants/cpu/flash_cpu/backward_tile_key_block.h"

namespace attnbench::flash_cpu {

// The AVX-512 operations under a name of this path's own, so that the templates it instantiates
// (the softmax) are not the same symbols as those of the paths compiled without AMX.
struct Avx512WithAmx : simd::Avx512 {};

TileKernels amx_bf16_kernels() { return tile_path_kernels<Avx512WithAmx, simd::AmxTiles>(); }

}  // namespace attnbench::flash_cpu
