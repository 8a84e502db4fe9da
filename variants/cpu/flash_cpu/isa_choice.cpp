#include "variants/cpu/flash_cpu/isa_choice.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "harness/simd/throughput_loops.h"

namespace attnbench::flash_cpu {

Isa choose_isa(std::string_view requested, const CpuFeatures& features,
               const std::function<bool()>& bf16_dot_is_faster) {
  if (!requested.empty()) {
    try {
      return parse_isa(requested, features);
    } catch (const std::invalid_argument& error) {
      throw std::invalid_argument(std::string("flash_cpu: ATTNBENCH_FLASH_CPU_ISA: ") +
                                  error.what());
    }
  }
  if (isa_runs_on(Isa::avx512_bf16, features) && bf16_dot_is_faster()) return Isa::avx512_bf16;
  return widest_isa(features);
}

Isa choose_isa_for_this_cpu() {
  const char* requested = std::getenv("ATTNBENCH_FLASH_CPU_ISA");
  const CpuFeatures& features = CpuFeatures::of_this_cpu();
  return choose_isa(requested == nullptr ? "" : requested, features, [&features] {
    static const bool faster = bf16_dot_outpaces_fma(features);
    return faster;
  });
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

DecodeKernels decode_kernels(Isa isa) {
  switch (isa) {
    case Isa::scalar: return scalar_decode_kernels();
#if defined(__x86_64__)
    case Isa::avx2: return avx2_decode_kernels();
    case Isa::avx512: return avx512_decode_kernels();
    case Isa::avx512_bf16: return avx512_bf16_decode_kernels();
#elif defined(__aarch64__)
    case Isa::neon: return neon_decode_kernels();
#endif
    default: break;
  }
  throw std::invalid_argument(std::string("flash_cpu: no ") + to_string(isa) +
                              " kernels in this build");
}

}  // namespace attnbench::flash_cpu
