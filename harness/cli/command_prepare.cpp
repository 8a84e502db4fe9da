// attnbench prepare DIR --inputs-dir TMP: one case of a producer outside C++ (the PyTorch peer),
// prepared as the sweep prepares its own: the skip decision (memory cap, the time budget
// predicted from the last ok record of the variant in DIR, with DIR's config) and, when it runs,
// the inputs the sweep would draw for it. Reads one JSON object on stdin:
//   {"variant", the shape's fields (as `plan --json` prints them), "seed" (plan --json's),
//    "workspace_bytes" (optional: the producer's estimate of its scratch memory)}
// and prints one line of JSON:
//   {"skip_reason": "" or why, "q", "k", "v": the .npy files written (float32 [batch, heads, seq,
//    d], values rounded to the dtype; a paged case's K and V read back through its block table,
//    contiguous), "visible_keys": one list per sequence of the batch, each [first, last) per
//    query row (a ragged batch's sequences differ: each mask is aligned to the end of that
//    sequence's own cache, and a sequence of fewer keys sees none past its length), or null
//    without a mask}
// so a producer holds no seed formula, input drawing, mask rule or time predictor of its own;
// `attnbench append` draws the same inputs again to check the producer's output.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "harness/cli/commands.h"
#include "harness/core/case_json.h"
#include "harness/core/mask.h"
#include "harness/core/shape_fields.h"
#include "harness/core/work_count.h"
#include "harness/measure/inputs.h"
#include "harness/measure/memory_limit.h"
#include "harness/measure/paged_cache.h"
#include "harness/results/json_file.h"
#include "harness/results/manifest.h"
#include "harness/results/measurement_records.h"
#include "harness/results/npy_io.h"
#include "harness/results/run_folder.h"
#include "harness/runner/case_budget.h"

namespace attnbench {

namespace {

// What `plan --json` prints of a case besides its variant, shape and seed: its place in the plan
// and id, the work it counts, where it runs and why it may not (command_plan.cpp, case_json.cpp).
// A case copied from the plan is prepared as given; these derived values are not read
// (tests/python/test_torch_peer.py feeds every key the plan prints back to prepare).
constexpr std::array<std::string_view, 13> plan_case_outputs = {
    "index",           "id",      "element_bytes", "pairs",       "flops",  "flop_convention",
    "dense_flops",     "density", "bytes",         "description", "device", "unsupported_reason",
    "peer_skip_reason"};

constexpr std::size_t max_case_bytes = std::size_t{1} << 20;

struct PreparedInputs {
  std::string skip_reason;
  std::string q, k, v;
};

nlohmann::json read_case() {
  std::string text;
  char buffer[1 << 12];
  while (const std::size_t got = std::fread(buffer, 1, sizeof buffer, stdin)) {
    text.append(buffer, got);
    if (text.size() > max_case_bytes)
      throw UsageError(
          fmt::format("stdin: more than {} bytes; one case is one JSON object", max_case_bytes));
  }
  try {
    nlohmann::json object = parse_json_within_depth<nlohmann::json>(text);
    if (!object.is_object()) throw UsageError("stdin: a case must be a JSON object");
    return object;
  } catch (const JsonTooDeep& error) {
    throw UsageError(fmt::format("stdin: {}", error.what()));
  } catch (const nlohmann::json::parse_error& error) {
    throw UsageError(fmt::format("stdin: not valid JSON (at byte {})", error.byte));
  }
}

// A number from a producer, checked: a JSON number, finite and not negative.
double non_negative(const nlohmann::json& object, const char* key) {
  if (!object.contains(key) || object[key].is_null()) return 0;
  if (!object[key].is_number() || object[key].get<double>() < 0 ||
      !std::isfinite(object[key].get<double>()))
    throw UsageError(fmt::format("stdin: '{}' must be a number, 0 or more", key));
  return object[key].get<double>();
}

uint64_t seed_of(const nlohmann::json& object) {
  if (!object.contains("seed") || !object["seed"].is_number_integer() ||
      (!object["seed"].is_number_unsigned() && object["seed"].get<int64_t>() < 0))
    throw UsageError("stdin: 'seed' must be an integer from 0 to 2^64 - 1 (plan --json's)");
  return object["seed"].get<uint64_t>();
}

// The last ok record of `variant` in the folder, as the time predictor reads it.
std::optional<ObservedCase> last_ok(const RunFolder& folder, const std::string& variant) {
  std::optional<ObservedCase> seen;
  for (const nlohmann::ordered_json& record : folder.records()) {
    if (record.value("variant", "") != variant || record.value("status", "") != "ok") continue;
    const auto& median = record["time_ms_median"];
    const auto& flops = record["flops"];
    if (median.is_number() && flops.is_number() && median.get<double>() > 0 &&
        flops.get<double>() > 0)
      seen = ObservedCase{flops.get<double>(), median.get<double>() / 1e3};
  }
  return seen;
}

std::string skip_reason(const RunFolder& folder, const SweepConfig& config,
                        const std::string& variant, const Shape& shape, double workspace) {
  if (std::string reason = over_memory_cap(config.measure, shape, workspace); !reason.empty())
    return reason;
  const double needed = workspace + host_harness_bytes(shape);
  if (std::string shortfall = memory_shortfall(needed, memory_available_now()); !shortfall.empty())
    return shortfall;
  if (const auto seen = last_ok(folder, variant))
    return over_time_budget(config.timing, *seen, count_work(shape).flops);
  return {};
}

NpyTensor as_npy(const std::vector<float>& values, const Shape& s, int64_t heads, int64_t seq,
                 int64_t dim) {
  NpyTensor tensor;
  tensor.shape = {s.batch, heads, seq, dim};
  tensor.data = values;
  return tensor;
}

// Every sequence is listed, alike or not, so a reader has one form for every batch.
nlohmann::json visible_keys(const Shape& s) {
  if (s.mask.kind == MaskKind::none) return nullptr;
  nlohmann::json sequences = nlohmann::json::array();
  for (int64_t b = 0; b < s.batch; ++b) {
    const MaskGeometry geometry = s.mask_geometry_of(b);
    nlohmann::json rows = nlohmann::json::array();
    for (int64_t row = 0; row < s.seq_q; ++row) {
      const KeyRange keys = geometry.keys(row);
      rows.push_back({keys.first, keys.last});
    }
    sequences.push_back(std::move(rows));
  }
  return sequences;
}

}  // namespace

void add_prepare_command(CLI::App& app, int& exit_code) {
  auto folder_path = std::make_shared<std::string>();
  auto inputs_dir = std::make_shared<std::string>();
  CLI::App* prepare = app.add_subcommand(
      "prepare",
      "Prepare one case of a producer outside C++ (JSON on stdin): skip it as a sweep would, or "
      "write the inputs a sweep would draw");
  prepare
      ->add_option("folder", *folder_path,
                   "The results folder the case's record will go to (append --init made it)")
      ->required();
  prepare->add_option("--inputs-dir", *inputs_dir, "Where to write q.npy, k.npy and v.npy")
      ->required();
  prepare->callback([folder_path, inputs_dir, &exit_code] {
    const nlohmann::json request = read_case();
    // A misspelt key (workspace_byte) was ignored and the case prepared without it, as append
    // --init refuses an unknown key: the variant, seed, workspace_bytes and the shape's fields,
    // and what `plan --json` says of a case besides (a case copied from the plan was refused at
    // its element_bytes): derived from the shape or the plan, those are not read.
    for (const auto& [key, value] : request.items()) {
      const bool shape_field =
          std::any_of(shape_fields().begin(), shape_fields().end(),
                      [&key = key](const ShapeField& field) { return key == field.name; });
      const bool plan_field = std::find(plan_case_outputs.begin(), plan_case_outputs.end(), key) !=
                              plan_case_outputs.end();
      if (!shape_field && !plan_field && key != "variant" && key != "seed" &&
          key != "workspace_bytes")
        throw UsageError(fmt::format(
            "stdin: unknown key '{}' (known: variant, seed, workspace_bytes, the shape's fields "
            "and the rest of a case as plan --json prints it)",
            escaped_controls(key)));
    }
    if (!request.contains("variant") || !request["variant"].is_string() ||
        request["variant"].get<std::string>().empty())
      throw UsageError("stdin: 'variant' missing");
    const std::string variant = request["variant"].get<std::string>();
    Shape shape;
    try {
      shape = shape_from_json(request);
    } catch (const std::runtime_error& error) {
      throw UsageError(fmt::format("stdin: {}", error.what()));
    }
    const uint64_t seed = seed_of(request);
    const double workspace = non_negative(request, "workspace_bytes");
    const RunFolder folder = RunFolder::open_read_only(*folder_path);
    const SweepConfig config =
        config_from_manifest(folder.manifest(), *folder_path + "/manifest.json");

    nlohmann::ordered_json out;
    out["skip_reason"] = skip_reason(folder, config, variant, shape, workspace);
    if (out["skip_reason"].get<std::string>().empty()) {
      HostTensors inputs =
          make_inputs(shape, *parse_distribution(config.measure.distribution), seed);
      // .npy files hold contiguous K and V, whatever cache the case lays them out in.
      gather_paged(inputs);
      std::filesystem::create_directories(*inputs_dir);
      const auto path = [&](const char* name) {
        return (std::filesystem::path(*inputs_dir) / name).string();
      };
      const NpyTensor q = as_npy(inputs.q, shape, shape.heads, shape.seq_q, shape.d_k);
      const NpyTensor k = as_npy(inputs.k, shape, shape.kv_heads, shape.seq_kv, shape.d_k);
      const NpyTensor v = as_npy(inputs.v, shape, shape.kv_heads, shape.seq_kv, shape.d_v);
      save_npy_files({{path("q.npy"), &q}, {path("k.npy"), &k}, {path("v.npy"), &v}});
      out["q"] = path("q.npy");
      out["k"] = path("k.npy");
      out["v"] = path("v.npy");
      out["visible_keys"] = visible_keys(shape);
    }
    fmt::print("{}\n", out.dump());
    exit_code = 0;
  });
}

}  // namespace attnbench
