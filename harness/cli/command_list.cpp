// attnbench list [--json]: the registered variants, what they support, and whether they can run
// on this machine.
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "harness/cli/commands.h"
#include "harness/measure/executor.h"
#include "harness/simd/cpu_features.h"
#include "harness/simd/isa.h"
#include "harness/variant/registry.h"

namespace attnbench {

namespace {

std::vector<std::string> dtype_names(const std::vector<DType>& dtypes) {
  std::vector<std::string> names;
  for (DType dtype : dtypes) names.emplace_back(to_string(dtype));
  return names;
}

std::vector<std::string> layout_names(const std::vector<Layout>& layouts) {
  std::vector<std::string> names;
  for (Layout layout : layouts) names.emplace_back(to_string(layout));
  return names;
}

// The mask kinds a variant takes, none and causal included.
std::vector<std::string> mask_names(const Capabilities& caps) {
  std::vector<std::string> names;
  for (MaskKind kind : all_mask_kinds())
    if (takes_mask(caps, kind)) names.emplace_back(to_string(kind));
  return names;
}

// "alibi,softcap", one of them, or "-".
std::string modifier_names(const Capabilities& caps) {
  if (caps.alibi && caps.softcap) return "alibi,softcap";
  if (caps.alibi) return "alibi";
  return caps.softcap ? "softcap" : "-";
}

nlohmann::ordered_json variant_json(const VariantInfo& info) {
  std::string unavailable;
  const bool runnable = device_available(info.device, &unavailable);
  const Capabilities& caps = info.capabilities;
  return {{"name", info.name},
          {"device", to_string(info.device)},
          {"summary", info.summary},
          {"capabilities",
           {{"causal", caps.causal},
            {"masks", mask_names(caps)},
            {"alibi", caps.alibi},
            {"softcap", caps.softcap},
            {"gqa", caps.gqa},
            {"returns_weights", caps.returns_weights},
            {"backward", caps.backward},
            {"ragged", caps.ragged},
            {"paged_kv", caps.paged_kv},
            {"dtypes", dtype_names(caps.dtypes)},
            {"layouts", layout_names(caps.layouts)},
            {"precision", to_string(caps.precision)},
            {"max_d", caps.max_d > 0 ? nlohmann::ordered_json(caps.max_d) : nullptr}}},
          {"runnable_here", runnable},
          {"unavailable_reason", unavailable}};
}

// One line of the table, its header and each variant's alike.
constexpr const char* variant_row =
    "{:<13} {:<6} {:<6} {:<15} {:<10} {:<7} {:<12} {:<14} {:<5} {:<8} {:<4} {:<13} {:<6} {:<10} "
    "{}\n";

std::string yes_no(bool value) { return value ? "yes" : "-"; }

// The serving inputs a variant takes beyond a contiguous cache of one length.
std::string kv_cache_names(const Capabilities& caps) {
  if (caps.ragged && caps.paged_kv) return "ragged,paged";
  if (caps.ragged) return "ragged";
  return caps.paged_kv ? "paged" : "-";
}

std::string runnable_isa_names() {
  std::vector<std::string> names;
  for (Isa isa : isas_built())
    if (isa_runs_on(isa, CpuFeatures::of_this_cpu())) names.emplace_back(to_string(isa));
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

void add_list_command(CLI::App& app, int& exit_code) {
  CLI::App* list =
      app.add_subcommand("list", "List the variants, their capabilities and whether they run here");
  auto as_json = std::make_shared<bool>(false);
  list->add_flag("--json", *as_json, "Print JSON instead of a table");
  auto isas = std::make_shared<bool>(false);
  list->add_flag("--isas", *isas,
                 "Print the SIMD paths this binary holds that this CPU runs, one a "
                 "line (the values ATTNBENCH_FLASH_CPU_ISA takes here)");
  list->callback([as_json, isas, &exit_code] {
    exit_code = 0;
    if (*isas) {
      for (Isa isa : isas_built())
        if (isa_runs_on(isa, CpuFeatures::of_this_cpu())) fmt::print("{}\n", to_string(isa));
      return;
    }
    Registry::instance().check_names();
    const auto variants = Registry::instance().all();
    if (*as_json) {
      nlohmann::ordered_json out = nlohmann::ordered_json::array();
      for (const auto& variant : variants) out.push_back(variant_json(variant.info));
      fmt::print("{}\n", out.dump(2));
    } else {
      fmt::print(variant_row, "variant", "device", "prec", "dtypes", "layouts", "causal", "masks",
                 "modifiers", "gqa", "weights", "bwd", "kv", "max_d", "runs here", "summary");
      for (const auto& variant : variants) {
        const VariantInfo& info = variant.info;
        std::string unavailable;
        const bool runnable = device_available(info.device, &unavailable);
        const std::vector<std::string> masks = mask_names(info.capabilities);
        fmt::print(
            variant_row, info.name, to_string(info.device), to_string(info.capabilities.precision),
            fmt::format("{}", fmt::join(dtype_names(info.capabilities.dtypes), ",")),
            fmt::format("{}", fmt::join(layout_names(info.capabilities.layouts), ",")),
            yes_no(info.capabilities.causal),
            masks.size() == all_mask_kinds().size() ? std::string("all")
                                                    : fmt::format("{}", fmt::join(masks, ",")),
            modifier_names(info.capabilities), yes_no(info.capabilities.gqa),
            yes_no(info.capabilities.returns_weights), yes_no(info.capabilities.backward),
            kv_cache_names(info.capabilities),
            info.capabilities.max_d > 0 ? std::to_string(info.capabilities.max_d) : "-",
            runnable ? "yes" : "no GPU", info.summary);
      }
      std::string reason;
      if (!device_available(Device::cuda, &reason))
        fmt::print("\nCUDA variants cannot run here: {}\n", reason);
      fmt::print("\nCPU features: {}; SIMD paths this CPU runs (ATTNBENCH_FLASH_CPU_ISA): {}\n",
                 CpuFeatures::of_this_cpu().describe(), runnable_isa_names());
    }
    exit_code = 0;
  });
}

}  // namespace attnbench
