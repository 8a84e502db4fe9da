// flash_cpu where V nears float's largest values. O is a convex combination of V's rows, so it
// fits in float wherever V does; its accumulator, the sum of p_j V_j before the division by the
// sum of the p_j, does not. The query blocks (vector and tile paths) and decode items whose
// accumulator overflowed are computed again with P scaled down (flash_cpu/output_overflow.h), and
// their L with it, so the backward recomputes the same P. On inputs that overflow it for certain
// (large_values.h), every path this binary holds that this CPU runs, the emulated tiles included,
// against the float64 oracle: the forward, and the backward with a dO small enough for the
// gradients to fit.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/measure/checked_run.h"
#include "harness/measure/inputs.h"
#include "tests/edge_shapes.h"
#include "tests/flash_cpu_paths.h"
#include "tests/large_values.h"

namespace attnbench {
namespace {

using testing::cpu_supports;
using testing::emulated_tiles_run_here;
using testing::flash_cpu;
using testing::isa_names_built;
using testing::kIsaVariable;
using testing::make_output_accumulator_overflow;
using testing::make_shape;
using testing::NamedShape;
using testing::ScopedEnvironment;

std::vector<std::string> paths_to_check() {
  std::vector<std::string> names;
  for (const std::string& name : isa_names_built())
    if (cpu_supports(name)) names.push_back(name);
  if (emulated_tiles_run_here()) names.emplace_back(kAmxEmulatedName);
  return names;
}

std::vector<NamedShape> overflow_shapes() {
  std::vector<NamedShape> shapes = {
      {"GQA 2/1, d 40/72, seq_q < seq_kv", make_shape(1, 2, 1, 130, 300, 40, 72, false)},
      {"causal, d 64", make_shape(1, 2, 2, 100, 100, 64, 64, true)},
      {"decode, GQA 4/1, two sequences", make_shape(2, 8, 2, 1, 700, 64, 64, false)},
  };
  std::vector<NamedShape> typed;
  for (DType dtype : {DType::fp32, DType::bf16})
    for (NamedShape named : shapes) {
      named.shape.dtype = dtype;
      named.name += std::string(", ") + to_string(dtype);
      typed.push_back(std::move(named));
    }
  return typed;
}

// flash_cpu (on the path ATTNBENCH_FLASH_CPU_ISA names) on `inputs` against the float64 oracle.
void check_on_oracle(Executor& executor, const std::string& path, const std::string& name,
                     const HostTensors& inputs) {
  const Shape& shape = inputs.shape;
  auto variant = flash_cpu().make();
  executor.workspace().release_all();
  variant->prepare(shape, executor.workspace());
  const OracleReport report =
      run_checked(*variant, executor, inputs, default_scale(shape), false, OracleOptions{});
  INFO(fmt::format("flash_cpu[{}] ({}) on {} ({}): rel L2 {:.3g}, max abs {:.3g}: {}", path,
                   variant->code_path(), name, describe(shape), report.rel_l2_err,
                   report.max_abs_err, report.failure));
  CHECK(report.passed);
}

TEST_CASE("flash_cpu's O fits where V nears float's largest values, on every path",
          "[flash_cpu][oracle]") {
  auto executor = make_executor(Device::cpu);
  for (const std::string& path : paths_to_check()) {
    const ScopedEnvironment isa(kIsaVariable, path);
    uint64_t seed = 900;
    for (const auto& [name, shape] : overflow_shapes()) {
      HostTensors inputs = make_inputs(shape, Distribution::normal, ++seed);
      make_output_accumulator_overflow(inputs);
      check_on_oracle(*executor, path, name, inputs);
    }
  }
}

TEST_CASE("flash_cpu's backward after a forward computed again for V near float's largest values",
          "[flash_cpu][backward][oracle]") {
  auto executor = make_executor(Device::cpu);
  for (const std::string& path : paths_to_check()) {
    const ScopedEnvironment isa(kIsaVariable, path);
    uint64_t seed = 950;
    for (auto [name, shape] : overflow_shapes()) {
      if (shape.seq_q == 1) continue;  // decode takes no backward
      shape.pass = Pass::bwd;
      HostTensors inputs = make_inputs(shape, Distribution::normal, ++seed);
      make_output_accumulator_overflow(inputs);
      // dO V^T and rowsum(dO o O) are then about 2^-100 * 2^125 * d: within float.
      for (float& value : inputs.dout) value = std::ldexp(value, -100);
      check_on_oracle(*executor, path, name, inputs);
    }
  }
}

}  // namespace
}  // namespace attnbench
