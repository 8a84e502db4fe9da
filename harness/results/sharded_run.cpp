#include "harness/results/sharded_run.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>

#include "harness/core/case_json.h"
#include "harness/results/atomic_file.h"
#include "harness/results/folder_lock.h"
#include "harness/results/run_folder.h"

namespace attnbench {

namespace {

namespace fs = std::filesystem;

// A whole run and a merged run are the one shard of a 1-way split.
Shard shard_of(const nlohmann::ordered_json& manifest, const std::string& path) {
  const std::string text = manifest.value("shard", "");
  if (text.empty() || text == "merged") return Shard{};
  try {
    return parse_shard(text);
  } catch (const std::exception&) {
    throw std::runtime_error(fmt::format("{}: manifest has a malformed shard '{}'", path, text));
  }
}

// "name", or "name (N more)" when a list would make the message long.
std::string short_list(const std::vector<std::string>& items, std::size_t shown = 4) {
  std::vector<std::string> head(items.begin(),
                                items.begin() + static_cast<long>(std::min(shown, items.size())));
  std::string text = fmt::format("{}", fmt::join(head, ", "));
  if (items.size() > shown) text += fmt::format(" and {} more", items.size() - shown);
  return text;
}

// manifest[object][key], or `fallback` where the manifest has no such object or key.
std::string member_or(const nlohmann::ordered_json& manifest, const char* object, const char* key,
                      const std::string& fallback) {
  if (manifest.contains(object) && manifest[object].is_object())
    return manifest[object].value(key, fallback);
  return fallback;
}

// " + " and the GPU's name where the run used one.
std::string gpu_suffix(const nlohmann::ordered_json& manifest, const std::string& fallback) {
  if (manifest.contains("gpu") && manifest["gpu"].is_object())
    return " + " + manifest["gpu"].value("name", fallback);
  return "";
}

std::string node_of(const nlohmann::ordered_json& manifest) {
  if (manifest.contains("node") && manifest["node"].is_string()) return manifest["node"];
  return member_or(manifest, "machine", "hostname", "");
}

std::string machine_of(const nlohmann::ordered_json& manifest) {
  return member_or(manifest, "machine", "description", "") + gpu_suffix(manifest, "");
}

}  // namespace

nlohmann::ordered_json plan_json(const std::string& shard, const std::vector<Case>& shard_cases,
                                 int64_t sweep_cases) {
  nlohmann::ordered_json ids = nlohmann::ordered_json::array();
  for (const Case& c : shard_cases) ids.push_back(c.id);
  return {{"shard", shard}, {"sweep_cases", sweep_cases}, {"case_ids", ids}};
}

std::size_t ShardState::missing_count() const {
  return static_cast<std::size_t>(std::count_if(
      planned.begin(), planned.end(), [&](const auto& id) { return finished.count(id) == 0; }));
}

ShardState inspect_shard(const std::string& path) {
  const RunFolder folder = RunFolder::open_read_only(path);
  ShardState state;
  state.path = path;
  state.manifest = folder.manifest();
  state.records = folder.records();
  state.checks = folder.peak_checks();
  state.shard = shard_of(state.manifest, path);
  state.finished = folder.finished_case_ids();
  const auto& manifest = state.manifest;
  if (!manifest.contains("plan") || !manifest["plan"].contains("case_ids")) {
    throw std::runtime_error(fmt::format(
        "{}: manifest has no case plan, so its completeness cannot be checked (rerun it with this "
        "attnbench)",
        path));
  }
  for (const auto& id : manifest["plan"]["case_ids"]) state.planned.push_back(id);
  return state;
}

std::string hardware_model(const nlohmann::ordered_json& manifest) {
  return member_or(manifest, "machine", "cpu_model", "unknown CPU") +
         gpu_suffix(manifest, "unknown GPU");
}

namespace {

// The shard's "I/N" as its manifest spells it; "" for a whole run.
std::string shard_name(const ShardState& shard) { return shard.manifest.value("shard", ""); }

// One sweep: same config, same split, each shard once. The shards by index.
std::map<int64_t, const ShardState*> check_one_sweep(const std::vector<ShardState>& shards) {
  const ShardState& first = shards.front();
  const auto config_of = [](const ShardState& s) {
    return s.manifest.value("config", nlohmann::ordered_json());
  };
  std::map<int64_t, const ShardState*> by_index;
  for (const ShardState& shard : shards) {
    if (config_of(shard) != config_of(first)) {
      throw std::runtime_error(
          fmt::format("merge: {} was run from a different config than {}", shard.path, first.path));
    }
    if (shard.shard.count != first.shard.count) {
      throw std::runtime_error(fmt::format("merge: {} is a shard of {} but {} is a shard of {}",
                                           shard.path, shard.shard.count, first.path,
                                           first.shard.count));
    }
    const auto [it, inserted] = by_index.emplace(shard.shard.index, &shard);
    if (!inserted) {
      throw std::runtime_error(fmt::format("merge: {} and {} are both shard {}/{}",
                                           it->second->path, shard.path, shard.shard.index,
                                           shard.shard.count));
    }
  }
  return by_index;
}

// Complete: every shard of the spec is present and holds every case its plan names.
void check_complete(const std::vector<ShardState>& shards,
                    const std::map<int64_t, const ShardState*>& by_index) {
  const ShardState& first = shards.front();
  std::vector<std::string> absent;
  for (int64_t index = 0; index < first.shard.count; ++index) {
    if (by_index.count(index) == 0)
      absent.push_back(fmt::format("{}/{}", index, first.shard.count));
  }
  if (!absent.empty()) {
    throw std::runtime_error(fmt::format("merge: shard{} {} of {} missing (given {} of {})",
                                         absent.size() == 1 ? "" : "s", short_list(absent),
                                         first.manifest.value("name", "the sweep"), shards.size(),
                                         first.shard.count));
  }
  for (const ShardState& shard : shards) {
    if (!shard.complete() && FolderLock::held_elsewhere(shard.path)) {
      throw std::runtime_error(fmt::format(
          "merge: {} (shard {}/{}) is still being run ({} of its {} cases to go: its folder is "
          "locked by the attnbench writing it); merge once it has finished",
          shard.path, shard.shard.index, shard.shard.count, shard.missing_count(),
          shard.planned.size()));
    }
    if (!shard.complete()) {
      throw std::runtime_error(fmt::format(
          "merge: {} (shard {}/{}) is incomplete: {} of its {} cases missing; finish it with "
          "`attnbench run ... --resume --out {}`",
          shard.path, shard.shard.index, shard.shard.count, shard.missing_count(),
          shard.planned.size(), shard.path));
    }
  }
}

// Comparable: one CPU model (and one GPU model), unless the user asks to mix them. Whether the
// shards mix hardware.
bool check_hardware(const std::vector<ShardState>& shards, bool allow_mixed) {
  std::map<std::string, std::string> path_of_model;
  for (const ShardState& shard : shards)
    path_of_model.emplace(hardware_model(shard.manifest), shard.path);
  if (path_of_model.size() > 1 && !allow_mixed) {
    std::vector<std::string> models;
    for (const auto& [model, path] : path_of_model)
      models.push_back(fmt::format("{} ({})", model, path));
    throw std::runtime_error(fmt::format(
        "merge: the shards ran on different hardware: {}; pass --allow-mixed to merge them anyway",
        fmt::join(models, " vs ")));
  }
  return path_of_model.size() > 1;
}

// A record is merged as the case its id names: one outside the shard's plan, or whose variant
// and shape fields spell another case (seq_q 999 under a q32 id), would be counted as that case
// and read as its measurement. The id, once checked.
std::string checked_case_id(const ShardState& shard, const std::set<std::string>& planned,
                            const nlohmann::ordered_json& record) {
  const std::string id = record.at("case_id").get<std::string>();
  if (planned.count(id) == 0) {
    throw std::runtime_error(
        fmt::format("merge: {}: case {} is not in the shard's plan", shard.path, id));
  }
  std::string spelled;
  try {
    spelled = case_id(record.value("variant", ""), shape_from_json(record));
  } catch (const std::exception& error) {
    throw std::runtime_error(
        fmt::format("merge: {}: the record of case {}: {}", shard.path, id, error.what()));
  }
  if (spelled != id) {
    throw std::runtime_error(fmt::format(
        "merge: {}: the record of case {} holds the fields of case {}", shard.path, id, spelled));
  }
  return id;
}

// Kept per record: a merged run can span nodes, and mixed hardware when allowed.
void tag_with_origin(nlohmann::ordered_json& record, const ShardState& shard) {
  if (!record.contains("node")) record["node"] = node_of(shard.manifest);
  if (!record.contains("machine")) record["machine"] = machine_of(shard.manifest);
  const std::string name = shard_name(shard);
  if (!name.empty() && !record.contains("shard")) record["shard"] = name;
}

nlohmann::ordered_json source_json(const ShardState& shard) {
  return {{"path", shard.path},
          {"shard", shard_name(shard)},
          {"node", node_of(shard.manifest)},
          {"hardware", hardware_model(shard.manifest)},
          {"git_commit", shard.manifest.value("git_commit", "")}};
}

struct MergedRecords {
  std::vector<nlohmann::ordered_json> records;  // each checked and tagged with its origin
  nlohmann::ordered_json sources = nlohmann::ordered_json::array();  // the manifest's merged_from
  int64_t planned_cases = 0;                                         // summed over the shards
};

// Every shard's records, each case in one shard only.
MergedRecords collect_records(const std::vector<ShardState>& shards) {
  MergedRecords merged;
  std::map<std::string, std::string> owner_of_case;
  for (const ShardState& shard : shards) {
    merged.sources.push_back(source_json(shard));
    merged.planned_cases += static_cast<int64_t>(shard.planned.size());
    const std::set<std::string> planned(shard.planned.begin(), shard.planned.end());
    for (nlohmann::ordered_json record : shard.records) {
      const std::string id = checked_case_id(shard, planned, record);
      const auto [it, inserted] = owner_of_case.emplace(id, shard.path);
      if (!inserted)
        throw std::runtime_error(
            fmt::format("merge: case {} is in both {} and {}", id, it->second, shard.path));
      tag_with_origin(record, shard);
      merged.records.push_back(std::move(record));
    }
  }
  return merged;
}

// The first shard's manifest, with the whole sweep's plan (the records' cases in order).
nlohmann::ordered_json merged_manifest(const ShardState& first, const MergedRecords& merged,
                                       int64_t sweep_cases, bool mixed_hardware) {
  nlohmann::ordered_json manifest = first.manifest;
  manifest["shard"] = "merged";
  manifest["plan"] = {
      {"shard", ""}, {"sweep_cases", sweep_cases}, {"case_ids", nlohmann::ordered_json::array()}};
  for (const auto& record : merged.records)
    manifest["plan"]["case_ids"].push_back(record["case_id"]);
  manifest["mixed_hardware"] = mixed_hardware;
  manifest["merged_from"] = merged.sources;
  // A merged run's checks are in its peaks.jsonl, each with its shard; the manifest's summary
  // is the first shard's.
  manifest.erase("peak_checks");
  return manifest;
}

}  // namespace

bool merge_may_replace(const fs::directory_entry& entry) {
  const std::string name = entry.path().filename().string();
  std::error_code error;
  const bool empty_file = (name == "cases.jsonl" || name == "peaks.jsonl") &&
                          entry.is_regular_file(error) && entry.file_size(error) == 0 && !error;
  // A staging folder of a merge killed here (write_merged_run): the lock on the folder keeps a
  // live merge's out of reach.
  const bool staging = name.rfind(".merging-", 0) == 0 && entry.is_directory(error);
  return empty_file || staging || is_leftover_temporary(name, "manifest.json") ||
         is_leftover_temporary(name, "summary.csv");
}

namespace {

// `out` named as a folder: absolute, without a trailing separator (whose filename is empty).
fs::path folder_path(const std::string& out) {
  fs::path path = fs::absolute(out).lexically_normal();
  if (!path.has_filename()) path = path.parent_path();
  return path;
}

void write_merged_files(const fs::path& folder, const nlohmann::ordered_json& manifest,
                        const std::vector<ShardState>& shards,
                        const std::vector<nlohmann::ordered_json>& records) {
  RunFolder merged = RunFolder::create(folder.string(), manifest);
  for (const ShardState& shard : shards) {
    for (PeakCheck check : shard.checks.checks()) {
      if (check.shard.empty()) check.shard = shard_name(shard);
      merged.append_peak_check(check);
    }
  }
  for (const auto& record : records) merged.append(record);
  merged.write_summary_csv();
}  // the staging folder's lock is released here

void rename_or_fail(const fs::path& from, const fs::path& to) {
  std::error_code error;
  fs::rename(from, to, error);
  if (error) {
    throw std::runtime_error(fmt::format("merge: cannot move {} to {}: {}", from.string(),
                                         to.string(), error.message()));
  }
  sync_directory_of(to.string());
}

// The files of the finished `staging` folder (inside `target`) moved up into `target`, past
// what merge_may_replace let stay there, the manifest last.
void move_files_up(const fs::path& staging, const fs::path& target) {
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(target, error))
    if (entry.path() != staging && merge_may_replace(entry)) fs::remove_all(entry.path(), error);
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(staging)) files.push_back(entry);
  std::stable_partition(files.begin(), files.end(),
                        [](const fs::path& file) { return file.filename() != "manifest.json"; });
  for (const fs::path& file : files) rename_or_fail(file, target / file.filename());
  fs::remove(staging, error);
}

// The part of a new --out's name its hidden staging folder carries: all of it, or its first 200
// bytes where ".NAME.merging-PID" would pass a file name's 255 (a valid 250-byte --out failed).
std::string staging_stem(const std::string& name) {
  constexpr std::size_t kLongest = 200;
  return name.size() <= kLongest ? name : name.substr(0, kLongest);
}

// Where the merged run is written before it is in place, so that a merge killed part-way never
// leaves a folder that reads as a finished run with cases missing (it had left --out with a
// manifest and some of the records, which merge refused as existing and resume as a merge's):
// - a new `out`: the whole folder is written as .NAME.merging-PID beside it (staging_stem's NAME)
//   and renamed to `out` once whole: a kill leaves no `out`;
// - an `out` that exists (empty, or holding only what merge_may_replace allows: a link to a
//   folder on another disk, a mount point, a folder made for the user in one they cannot write):
//   it is locked, the files are written into `out`/.merging-PID and renamed up one by one, the
//   manifest last: a kill leaves no manifest, so no run a reader would take as finished.
// On an error the staging folder is removed.
void write_merged_run(const std::string& out, const nlohmann::ordered_json& manifest,
                      const std::vector<ShardState>& shards,
                      const std::vector<nlohmann::ordered_json>& records) {
  const fs::path target = folder_path(out);
  std::error_code error;
  const bool exists = fs::is_directory(target, error);  // through a link
  const std::string pid = std::to_string(::getpid());
  const fs::path staging =
      exists ? target / (".merging-" + pid)
             : target.parent_path() /
                   ("." + staging_stem(target.filename().string()) + ".merging-" + pid);
  FolderLock lock;
  if (exists) lock = FolderLock::acquire(target.string());
  fs::remove_all(staging, error);  // a staging folder of an earlier process of this pid
  try {
    write_merged_files(staging, manifest, shards, records);
    if (exists) {
      move_files_up(staging, target);
    } else {
      rename_or_fail(staging, target);
    }
  } catch (...) {
    fs::remove_all(staging, error);
    throw;
  }
}

}  // namespace

void merge_runs(const std::vector<std::string>& shard_paths, const std::string& out,
                bool allow_mixed) {
  if (shard_paths.empty()) throw std::runtime_error("merge: no shard folders given");
  std::vector<ShardState> shards;
  for (const std::string& path : shard_paths) shards.push_back(inspect_shard(path));
  check_complete(shards, check_one_sweep(shards));
  const bool mixed_hardware = check_hardware(shards, allow_mixed);
  MergedRecords merged = collect_records(shards);

  const ShardState& first = shards.front();
  const int64_t sweep_cases = first.manifest["plan"].value("sweep_cases", merged.planned_cases);
  if (merged.planned_cases != sweep_cases) {
    throw std::runtime_error(fmt::format("merge: the shards plan {} cases but the sweep has {}",
                                         merged.planned_cases, sweep_cases));
  }
  std::stable_sort(merged.records.begin(), merged.records.end(), [](const auto& a, const auto& b) {
    return a.value("case_index", 0) < b.value("case_index", 0);
  });
  write_merged_run(out, merged_manifest(first, merged, sweep_cases, mixed_hardware), shards,
                   merged.records);
}

}  // namespace attnbench
