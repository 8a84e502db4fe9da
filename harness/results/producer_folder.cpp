#include "harness/results/producer_folder.h"

#include <fmt/format.h>

#include <filesystem>
#include <stdexcept>

#include "harness/plan/config.h"
#include "harness/results/json_file.h"
#include "harness/results/manifest.h"
#include "harness/results/measurement_records.h"
#include "harness/results/run_folder.h"

namespace attnbench {

namespace {

std::invalid_argument refusal(const std::string& problem) {
  return std::invalid_argument("stdin: " + problem);
}

// The producer's description, checked: {"name", "peaks", "peer"}, each optional.
nlohmann::ordered_json producer_description(const std::string& text) {
  if (text.empty()) return nlohmann::ordered_json::object();
  nlohmann::ordered_json description;
  try {
    description = parse_json_within_depth<nlohmann::ordered_json>(text);
  } catch (const JsonTooDeep& error) {
    throw refusal(error.what());
  } catch (const nlohmann::json::parse_error& error) {
    throw refusal(fmt::format("not valid JSON (at byte {})", error.byte));
  }
  if (!description.is_object()) throw refusal("the description must be a JSON object");
  for (const auto& [key, value] : description.items()) {
    if (key != "name" && key != "peaks" && key != "peer")
      throw refusal(
          fmt::format("unknown key '{}' (known: name, peaks, peer)", escaped_controls(key)));
  }
  if (description.contains("name") &&
      (!description["name"].is_string() || description["name"].get<std::string>().empty()))
    throw refusal("'name' must be a non-empty string");
  if (description.contains("peaks")) {
    if (!description["peaks"].is_object()) throw refusal("'peaks' must be an object");
    for (const auto& [name, gflops] : description["peaks"].items()) {
      try {
        non_negative_number(gflops, "peaks." + name);
      } catch (const BadMeasurement& error) {
        throw refusal(escaped_controls(error.what()));
      }
    }
  }
  return description;
}

// The manifest with the producer's name, its own peaks (never one the harness measures) and its
// description of itself.
void describe_producer(nlohmann::ordered_json& manifest,
                       const nlohmann::ordered_json& description) {
  if (description.contains("name")) manifest["name"] = description["name"];
  if (description.contains("peaks")) {
    for (const auto& [name, gflops] : description["peaks"].items()) {
      if (manifest["peaks"].contains(name))
        throw refusal(fmt::format("peak '{}' is one the harness measures", escaped_controls(name)));
      manifest["peaks"][name] = gflops;
    }
  }
  manifest["peer"] = description.value("peer", nlohmann::ordered_json(nullptr));
}

}  // namespace

void make_producer_folder(const ProducerFolderRequest& request) {
  const nlohmann::ordered_json description = producer_description(request.description_text);
  const SweepConfig config = load_config(request.config_path, request.overrides);
  std::error_code error;
  if (std::filesystem::exists(request.path, error) &&
      (!std::filesystem::is_directory(request.path, error) ||
       !std::filesystem::is_empty(request.path, error)))
    throw std::invalid_argument(
        fmt::format("{}: already exists and is not an empty folder; choose another", request.path));
  MeasuredPeaks peaks;
  PeakCheck start;
  nlohmann::ordered_json manifest =
      make_manifest(config, request.command, "", request.cuda, peaks, start);
  describe_producer(manifest, description);
  RunFolder folder = RunFolder::create(request.path, manifest);
  folder.append_peak_check(start);
}

}  // namespace attnbench
