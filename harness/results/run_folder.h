// One run's folder: manifest.json, cases.jsonl (one record per case, appended and flushed as each
// finishes, so an interrupted run keeps everything it finished) and summary.csv.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "harness/results/folder_lock.h"

namespace attnbench {

class RunFolder {
 public:
  // Creates `path` (or takes an existing folder that holds no results), locks it and checks it
  // can be written; the manifest follows with write_manifest(). Refuses (std::runtime_error)
  // when the folder holds a run, is in use by another run, or cannot be written: results are
  // never overwritten. Call it before slow work, so a bad --out fails at once.
  static RunFolder create(const std::string& path);
  static RunFolder create(const std::string& path, const nlohmann::ordered_json& manifest);

  // Opens and locks an existing run to finish it. A last line cut short by a kill is dropped;
  // a damaged record is an error naming the file and line.
  static RunFolder open_existing(const std::string& path);

  // Reads a run (a shard to merge, or to inspect) without changing it.
  static RunFolder open_read_only(const std::string& path);

  const std::string& path() const { return path_; }
  const nlohmann::ordered_json& manifest() const { return manifest_; }
  const std::vector<nlohmann::ordered_json>& records() const { return records_; }
  std::set<std::string> finished_case_ids() const;

  // Appends one record to cases.jsonl and flushes it to disk before returning.
  void append(const nlohmann::ordered_json& record);

  // Replaces the records whose case_id is in `updated` (the same cases, rated again after the
  // run's last peak check) and rewrites cases.jsonl through a temporary file and a rename.
  void replace_records(const std::vector<nlohmann::ordered_json>& updated);

  // Moves the records of failed cases out of cases.jsonl into failed_attempts.jsonl (appended and
  // flushed first; cases.jsonl is then rewritten through a temporary file and a rename), so that
  // a resumed run runs those cases again and no record is lost. Returns how many moved.
  int64_t set_aside_failed_records();

  // Rewrites summary.csv from the records (written to a temporary file, then renamed).
  void write_summary_csv() const;

  void write_manifest(const nlohmann::ordered_json& manifest);

 private:
  explicit RunFolder(std::string path) : path_(std::move(path)) {}
  std::string path_;
  FolderLock lock_;  // held while this object lives: one run writes a folder at a time
  nlohmann::ordered_json manifest_;
  std::vector<nlohmann::ordered_json> records_;
};

}  // namespace attnbench
