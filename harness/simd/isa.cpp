#include "harness/simd/isa.h"

#include <stdexcept>

namespace attnbench {

const char* to_string(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::avx512_bf16: return "avx512_bf16";
    case Isa::amx_bf16: return "amx_bf16";
    case Isa::neon: return "neon";
  }
  return "?";
}

const std::vector<Isa>& isas_built() {
#if defined(__x86_64__)
  static const std::vector<Isa> built = {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_bf16,
                                         Isa::amx_bf16};
#elif defined(__aarch64__)
  static const std::vector<Isa> built = {Isa::scalar, Isa::neon};
#else
  static const std::vector<Isa> built = {Isa::scalar};
#endif
  return built;
}

CpuFeatures required_features(Isa isa) {
  CpuFeatures needed;
  switch (isa) {
    case Isa::scalar: break;
    // The tile path's softmax takes VREDUCEPS (AVX512DQ, which every CPU with AMX has).
    case Isa::amx_bf16: needed.amx_tile = needed.amx_bf16 = needed.avx512dq = true; [[fallthrough]];
    case Isa::avx512_bf16:
      needed.avx512vl = needed.avx512bw = needed.avx512bf16 = true;
      [[fallthrough]];
    case Isa::avx512: needed.avx512f = true; [[fallthrough]];
    case Isa::avx2: needed.avx2 = needed.fma = needed.f16c = true; break;
    case Isa::neon: needed.neon = true; break;
  }
  return needed;
}

bool isa_runs_on(Isa isa, const CpuFeatures& features) {
  bool built = false;
  for (Isa candidate : isas_built()) built |= candidate == isa;
  return built && features.covers(required_features(isa));
}

Isa widest_isa(const CpuFeatures& features) {
  for (Isa isa : {Isa::avx512, Isa::avx2, Isa::neon})
    if (isa_runs_on(isa, features)) return isa;
  return Isa::scalar;
}

Isa parse_isa(std::string_view requested, const CpuFeatures& features) {
  std::string names;
  for (Isa isa :
       {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_bf16, Isa::amx_bf16, Isa::neon}) {
    names += names.empty() ? "" : ", ";
    names += to_string(isa);
    if (requested != to_string(isa)) continue;
    bool built = false;
    for (Isa candidate : isas_built()) built |= candidate == isa;
    if (!built)
      throw std::invalid_argument(std::string(requested) +
                                  " kernels are not built for this architecture");
    if (!isa_runs_on(isa, features))
      throw std::invalid_argument(std::string(requested) + " needs " +
                                  required_features(isa).describe() + "; this CPU has " +
                                  features.describe());
    return isa;
  }
  throw std::invalid_argument("'" + std::string(requested) + "' is not one of " + names);
}

CpuFeatures limit_to_path(std::string_view path_name, const CpuFeatures& detected) {
  try {
    return required_features(parse_isa(path_name, detected));
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument(std::string("ATTNBENCH_CPU_FEATURES: ") + error.what());
  }
}

}  // namespace attnbench
