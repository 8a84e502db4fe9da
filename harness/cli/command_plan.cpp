// attnbench plan CONFIG [--json]: the cases a config expands to, with their shapes, dtypes,
// layouts and work, and whether each variant takes them; nothing is run. Tools outside C++ (the
// PyTorch peer, scripts) read this instead of expanding configs themselves.
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "harness/cli/commands.h"
#include "harness/cli/sweep_arguments.h"
#include "harness/core/case_json.h"
#include "harness/core/shape_fields.h"
#include "harness/core/tolerance.h"
#include "harness/measure/inputs.h"
#include "harness/plan/axes_table.h"
#include "harness/plan/settings.h"
#include "harness/variant/registry.h"

namespace attnbench {

namespace {

// What a peer needs to run a case as the sweep would, beside its shape: the seed its inputs are
// drawn from (`attnbench prepare` draws them, `attnbench append` draws them again to check), and
// why the PyTorch peer leaves it out (the axes table's peer column), empty when it times it.
void add_peer_fields(nlohmann::ordered_json& entry, const SweepConfig& config, const Case& c) {
  entry["seed"] = case_input_seed(config.measure.seed, config.measure.interleave, c);
  entry["peer_skip_reason"] = peer_skip_reason(c.shape);
}

// The oracle's tolerances by dtype (fp32 arithmetic; tf32 is a variant's precision, not a dtype),
// as applied on well-conditioned inputs; past well_conditioned_max_score they grow (tolerance.h).
nlohmann::ordered_json tolerances_json() {
  nlohmann::ordered_json tolerances;
  for (const DType dtype : all_dtypes()) {
    const Tolerance tolerance = conditioned_tolerance(dtype, Precision::fp32, 0);
    tolerances[to_string(dtype)] = {{"rel_l2", tolerance.rel_l2},
                                    {"max_abs", tolerance.max_abs},
                                    {"well_conditioned_max_score", well_conditioned_max_score}};
  }
  return tolerances;
}

}  // namespace

void add_plan_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<SweepArguments>();
  CLI::App* plan = app.add_subcommand(
      "plan",
      "List the cases a config expands to (shape, dtype, layout, FLOPs, bytes); runs nothing");
  add_sweep_options(plan, *args);
  plan->add_option("--shard", args->shard, "Only the cases of shard I/N");
  auto as_json = std::make_shared<bool>(false);
  plan->add_flag("--json", *as_json, "Print JSON instead of a table");
  plan->callback([args, as_json, &exit_code] {
    SweepConfig config;
    const std::vector<Case> cases = plan_cases(*args, config);
    nlohmann::ordered_json listed = nlohmann::ordered_json::array();
    for (const Case& c : cases) {
      const VariantInfo& info = Registry::instance().find(c.variant)->info;
      nlohmann::ordered_json entry = case_json(c);
      entry["device"] = to_string(info.device);
      entry["unsupported_reason"] = unsupported_reason(info, c.shape, false);
      add_peer_fields(entry, config, c);
      listed.push_back(std::move(entry));
    }
    if (*as_json) {
      nlohmann::ordered_json out;
      out["name"] = config.name;
      out["config"] = config.as_json;
      // The effective settings, defaults filled in, for tools that time cases themselves.
      const TimingOptions& t = config.timing;
      const MeasureConfig& m = config.measure;
      out["measure"] = {{"warmup", t.warmup_runs},          {"repetitions", t.repetitions},
                        {"min_time_s", t.min_time_s},       {"case_budget_s", t.case_budget_s},
                        {"memory_cap_gb", m.memory_cap_gb}, {"cold", t.cold},
                        {"distribution", m.distribution},   {"seed", m.seed}};
      out["oracle"] = {{"full_check_max_n", config.oracle.full_check_max_n},
                       {"sample_rows", config.oracle.sample_rows},
                       {"sample_seed", config.oracle.sample_seed}};
      out["settings"] = settings_json(config);
      out["tolerances"] = tolerances_json();
      // The fields of each case that are its shape (shape_fields.h): what a peer hands `prepare`
      // and `append` back, so a new axis reaches them with no change to the peer.
      nlohmann::ordered_json shape_field_names = nlohmann::ordered_json::array();
      for (const ShapeField& field : shape_fields()) shape_field_names.push_back(field.name);
      out["shape_fields"] = std::move(shape_field_names);
      out["cases"] = std::move(listed);
      fmt::print("{}\n", out.dump(2));
    } else {
      fmt::print("{:>5} {:<13} {:<44} {:>12} {:>12}  {}\n", "index", "variant", "shape", "GFLOP",
                 "MB", "unsupported");
      for (const auto& entry : listed) {
        fmt::print("{:>5} {:<13} {:<44} {:>12.4g} {:>12.4g}  {}\n", entry["index"].get<int64_t>(),
                   entry["variant"].get<std::string>(), entry["description"].get<std::string>(),
                   entry["flops"].get<double>() / 1e9, entry["bytes"].get<double>() / 1e6,
                   entry["unsupported_reason"].get<std::string>());
      }
    }
    exit_code = 0;
  });
}

}  // namespace attnbench
