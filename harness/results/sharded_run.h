// The shards of one sweep (`run --shard I/N`): what each was planned to hold, whether it finished,
// and joining them into one run. A shard's manifest records its plan (the case ids it must hold
// and the size of the whole sweep), so completeness is checked from the shards themselves, not
// from a config that may have changed since.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "harness/plan/sweep.h"
#include "harness/results/peak_checks.h"

namespace attnbench {

// The manifest's "plan": the shard ("I/N", or "" for a whole run), its case ids in order, and how
// many cases the unsharded sweep has.
nlohmann::ordered_json plan_json(const std::string& shard, const std::vector<Case>& shard_cases,
                                 int64_t sweep_cases);

struct ShardState {
  std::string path;
  Shard shard;                       // 0/1 for a whole (or merged) run
  std::vector<std::string> planned;  // the case ids the plan names
  std::set<std::string> finished;    // the case ids with a record
  nlohmann::ordered_json manifest;
  std::vector<nlohmann::ordered_json> records;
  PeakChecks checks;  // the shard's peak checks, all its sessions

  std::size_t missing_count() const;
  bool complete() const { return missing_count() == 0; }
};

// Reads a shard folder without changing it. Throws std::runtime_error for a folder that is not a
// run, or whose manifest has no plan (so completeness cannot be known).
ShardState inspect_shard(const std::string& path);

// The CPU model, and the GPU name when the run used one: shards are only comparable on one kind.
std::string hardware_model(const nlohmann::ordered_json& manifest);

// Joins the shards of one sweep into one run at `out`. Refuses (std::runtime_error, one line)
// when a shard of the spec is missing or incomplete, a case is in two shards, the configs differ,
// or the shards ran on different CPU or GPU models (unless `allow_mixed`). Every merged record
// keeps the node and machine it ran on ("node", "machine"), so plots can group by them, and its
// shard ("shard"). The shards' peak checks go to the merged peaks.jsonl, each tagged with its
// shard: a record is rated against the best check of its own shard, because shards run on
// different nodes (or at different times on one) and a check measures only the node and the
// moment it was taken: one node's peak says nothing of another's, and pooling them would rate a
// slower node's records against a faster node's peak and flag every record as disturbed by the
// spread between nodes. summary.csv is written once, from the rated records.
// Whether an entry of an existing --out folder is one a merge may replace: an empty cases.jsonl,
// or a temporary of an interrupted write of the manifest or summary.csv (what a run killed as it
// started leaves). A folder holding anything else is a run: merge refuses it.
bool merge_may_replace(const std::filesystem::directory_entry& entry);

// merge_runs writes `out` under a staging name beside it and renames it there once whole.
void merge_runs(const std::vector<std::string>& shard_paths, const std::string& out,
                bool allow_mixed = false);

}  // namespace attnbench
