#include "variants/cpu/flash_cpu/isa_choice.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "harness/simd/throughput_loops.h"

namespace attnbench::flash_cpu {

namespace {

[[noreturn]] void refuse(const std::string& reason) {
  throw std::invalid_argument("flash_cpu: ATTNBENCH_FLASH_CPU_ISA: " + reason);
}

Isa automatic_isa(const CpuFeatures& features, const std::function<bool()>& bf16_dot_is_faster) {
  if (isa_runs_on(Isa::avx512_bf16, features) && bf16_dot_is_faster()) return Isa::avx512_bf16;
  return widest_isa(features);
}

}  // namespace

PathChoice choose_paths(std::string_view requested, const CpuFeatures& features,
                        const std::function<bool()>& bf16_dot_is_faster) {
  if (requested == kEmulatedVectorsName) {
#if defined(__x86_64__)
    if (!isa_runs_on(Isa::avx2, features))
      refuse(std::string(kEmulatedVectorsName) +
             " (the avx512_bf16 path on emulated AVX-512) needs " +
             required_features(Isa::avx2).describe() + "; this CPU has " + features.describe());
    return {Isa::avx512_bf16, TileBackend::none, true};
#else
    refuse(std::string(kEmulatedVectorsName) + " is built on x86-64 only");
#endif
  }
  if (requested == kEmulatedTilesName) {
    if (!isa_runs_on(Isa::avx2, features))
      refuse(std::string(kEmulatedTilesName) + " (the amx_bf16 path on emulated tiles) needs " +
             required_features(Isa::avx2).describe() + "; this CPU has " + features.describe());
    return {automatic_isa(features, bf16_dot_is_faster), TileBackend::emulated};
  }
  if (!requested.empty()) {
    Isa isa = Isa::scalar;
    try {
      isa = parse_isa(requested, features);
    } catch (const std::invalid_argument& error) {
      refuse(error.what());
    }
    if (isa != Isa::amx_bf16) return {isa, TileBackend::none};
    return {automatic_isa(features, bf16_dot_is_faster), TileBackend::hardware};
  }
  return {automatic_isa(features, bf16_dot_is_faster),
          isa_runs_on(Isa::amx_bf16, features) ? TileBackend::hardware : TileBackend::none};
}

Isa choose_isa(std::string_view requested, const CpuFeatures& features,
               const std::function<bool()>& bf16_dot_is_faster) {
  return choose_paths(requested, features, bf16_dot_is_faster).isa;
}

PathChoice choose_paths_for_this_cpu() {
  const char* requested = std::getenv("ATTNBENCH_FLASH_CPU_ISA");
  const CpuFeatures& features = CpuFeatures::of_this_cpu();
  return choose_paths(requested == nullptr ? "" : requested, features, [&features] {
    static const bool faster = bf16_dot_outpaces_fma(features);
    return faster;
  });
}

Isa choose_isa_for_this_cpu() { return choose_paths_for_this_cpu().isa; }

TileKernels tile_kernels(TileBackend tiles) {
#if defined(__x86_64__)
  if (tiles == TileBackend::hardware) return amx_bf16_kernels();
  if (tiles == TileBackend::emulated) return amx_bf16_emulated_kernels();
#else
  static_cast<void>(tiles);
#endif
  throw std::invalid_argument("flash_cpu: no tile kernels in this build");
}

Kernels vector_kernels(const PathChoice& paths) {
#if defined(__x86_64__)
  if (paths.emulated_vectors) return avx512_bf16_emulated_kernels();
#endif
  return kernels_of(paths.isa);
}

std::string vector_path_name(const PathChoice& paths) {
  return paths.emulated_vectors ? kEmulatedVectorsName : to_string(paths.isa);
}

Kernels kernels_of(Isa isa) {
  switch (isa) {
    case Isa::scalar: return scalar_kernels();
#if defined(__x86_64__)
    case Isa::avx2: return avx2_kernels();
    case Isa::avx512: return avx512_kernels();
    case Isa::avx512_bf16: return avx512_bf16_kernels();
#elif defined(__aarch64__)
    case Isa::neon: return neon_kernels();
#endif
    default: break;
  }
  throw std::invalid_argument(std::string("flash_cpu: no ") + to_string(isa) +
                              " kernels in this build");
}

}  // namespace attnbench::flash_cpu
