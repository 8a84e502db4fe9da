// What the flash_cpu tests share: the variant by name, and forcing each of its SIMD paths in turn
// (ATTNBENCH_FLASH_CPU_ISA, set for one scope), skipping those this CPU cannot run.
#pragma once

#include <catch2/catch.hpp>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/measure/checked_run.h"
#include "harness/measure/inputs.h"
#include "harness/simd/cpu_features.h"
#include "harness/simd/isa.h"
#include "harness/variant/registry.h"

namespace attnbench::testing {

inline constexpr const char* kIsaVariable = "ATTNBENCH_FLASH_CPU_ISA";

// Sets an environment variable for one scope and puts the old value back after it.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnvironment() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

inline const RegisteredVariant& flash_cpu() {
  const RegisteredVariant* registered = Registry::instance().find("flash_cpu");
  REQUIRE(registered != nullptr);
  return *registered;
}

// Whether this binary holds `isa` (a path of isas_built() or a path on emulated AVX-512) and this
// CPU runs it; the emulated paths run wherever AVX2 does.
inline bool cpu_supports(const std::string& isa) {
  const bool emulated = isa == kAmxEmulatedName || isa == kAvx512Bf16EmulatedName;
  try {
    parse_isa(emulated ? "avx2" : isa, CpuFeatures::of_this_cpu());
    return true;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

// Whether the amx_bf16 path's emulated tiles (ATTNBENCH_FLASH_CPU_ISA=amx_bf16_emulated) run
// here: built (x86) and on a CPU with AVX2 (their AVX-512 steps emulated, avx512_emulation.h).
inline bool emulated_tiles_run_here() {
  bool built = false;
  for (Isa isa : isas_built()) built |= isa == Isa::amx_bf16;
  return built && cpu_supports("avx2");
}

// Every vector path this binary holds, by name: the oracle tests force each in turn. On x86-64
// that includes the avx512_bf16 path on emulated AVX-512, so a CPU without AVX-512 still holds
// the AVX-512 code (the avx512 path's templates and vdpbf16ps's) against the oracle.
inline std::vector<std::string> isa_names_built() {
  std::vector<std::string> names;
  for (Isa isa : isas_built()) {
    names.emplace_back(to_string(isa));
    if (isa == Isa::avx512_bf16) names.emplace_back(kAvx512Bf16EmulatedName);
  }
  return names;
}

// flash_cpu prepared afresh for `shape` in `executor`'s released workspace, run on inputs of
// `seed` drawn from `distribution` through the harness's float64 oracle (the forward, then for a
// backward pass the gradients).
inline OracleReport flash_cpu_through_oracle(Executor& executor, const Shape& shape, uint64_t seed,
                                             Distribution distribution = Distribution::normal) {
  auto variant = flash_cpu().make();
  executor.workspace().release_all();
  variant->prepare(shape, executor.workspace());
  const HostTensors inputs = make_inputs(shape, distribution, seed);
  return run_checked(*variant, executor, inputs, default_scale(shape), false, OracleOptions{});
}

}  // namespace attnbench::testing
