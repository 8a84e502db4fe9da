#include "harness/results/reader_check.h"

#include <fmt/format.h>

namespace attnbench {

std::string manifest_reader_problem(const nlohmann::ordered_json& manifest) {
  static const char* const shown[] = {"name",  "config",  "config_text", "git_commit", "date",
                                      "build", "machine", "peaks",       "gpu"};
  for (const char* key : shown)
    if (!manifest.contains(key)) return fmt::format("missing '{}'", key);
  if (!manifest["name"].is_string()) return "'name' is not a string";
  if (!manifest["machine"].is_object() || !manifest["machine"].contains("description"))
    return "'machine' has no 'description'";
  if (!manifest["peaks"].is_object()) return "'peaks' is not an object";
  if (!manifest["gpu"].is_null() && !manifest["gpu"].contains("name"))
    return "'gpu' is neither null nor a GPU with a 'name'";
  return {};
}

std::string record_reader_problem(const nlohmann::ordered_json& upgraded) {
  static const char* const shown[] = {"variant",
                                      "device",
                                      "precision",
                                      "batch",
                                      "heads",
                                      "kv_heads",
                                      "seq_q",
                                      "seq_kv",
                                      "d_k",
                                      "d_v",
                                      "causal",
                                      "status",
                                      "reason",
                                      "time_ms_median",
                                      "time_ms_min",
                                      "time_ms_max",
                                      "cv",
                                      "gflops",
                                      "workspace_bytes",
                                      "oracle_max_abs_err",
                                      "oracle_rel_l2_err",
                                      "oracle_sampled"};
  for (const char* key : shown)
    if (!upgraded.contains(key)) return fmt::format("missing '{}'", key);
  if (upgraded.at("status") == "ok" && !upgraded.at("gflops").is_number())
    return "status ok but 'gflops' is null";
  return {};
}

}  // namespace attnbench
