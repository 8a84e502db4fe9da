// One run's folder: manifest.json, cases.jsonl (one record per case, appended and flushed as each
// finishes, so an interrupted run keeps everything it finished, and never rewritten), peaks.jsonl
// (one line per peak check, appended the same way; records are rated against its best when read)
// and summary.csv (written when a run ends, from the rated records).
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "harness/results/folder_lock.h"
#include "harness/results/peak_checks.h"

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
  // a damaged record is an error naming the file and line. Removes every temporary a killed
  // write left in the folder, undoes the half of a set_aside_failed_records() that a kill
  // interrupted, and gives a folder written before peaks.jsonl existed its peaks.jsonl (from the
  // manifest's peak_checks).
  static RunFolder open_existing(const std::string& path);

  // Reads a run (a shard to merge, or to inspect) without changing it.
  static RunFolder open_read_only(const std::string& path);

  const std::string& path() const { return path_; }
  const nlohmann::ordered_json& manifest() const { return manifest_; }
  // The records as stored (facts only), in file order.
  const std::vector<nlohmann::ordered_json>& records() const { return records_; }
  // The records as readers show them: each upgraded to the current schema (upgrade_record) and
  // rated by rate_record() against peak_checks().
  std::vector<nlohmann::ordered_json> rated_records() const;
  // Every peak check of the folder, all sessions: peaks.jsonl (a folder written before it
  // existed: its manifest's peak_checks).
  const PeakChecks& peak_checks() const { return peak_checks_; }
  std::set<std::string> finished_case_ids() const;

  // Appends one record to cases.jsonl and flushes it to disk before returning.
  void append(const nlohmann::ordered_json& record);

  // Appends one peak check to peaks.jsonl and flushes it to disk before returning.
  void append_peak_check(const PeakCheck& check);

  // Moves the records of failed cases out of cases.jsonl into failed_attempts.jsonl, so that a
  // resumed run runs those cases again and no record is lost: the size of failed_attempts.jsonl
  // goes to a journal, the failed lines are appended there and flushed, cases.jsonl is rewritten
  // (its other lines byte for byte) through a temporary file and a rename, and the journal is
  // removed. A kill anywhere leaves every record in cases.jsonl or failed_attempts.jsonl, and
  // open_existing() undoes a move the kill cut short, so moving again never doubles a record.
  // The one rewrite of cases.jsonl. Returns how many moved.
  int64_t set_aside_failed_records();

  // The rated records in case order (a stable sort: a case's records keep their file order).
  std::vector<nlohmann::ordered_json> rated_records_by_case() const;
  // summary.csv's text: a header of every CSV field, then a row per rated record, in case order.
  std::string summary_csv() const;
  // Writes summary.csv (a temporary file, then a rename); once, when a run (or a resume, or a
  // merge) ends.
  void write_summary_csv() const;

  void write_manifest(const nlohmann::ordered_json& manifest);

 private:
  explicit RunFolder(std::string path) : path_(std::move(path)) {}
  // The half of a set_aside_failed_records() a kill interrupted, undone (see there).
  void finish_interrupted_move();
  std::string path_;
  FolderLock lock_;  // held while this object lives: one run writes a folder at a time
  nlohmann::ordered_json manifest_;
  std::vector<nlohmann::ordered_json> records_;
  PeakChecks peak_checks_;
};

}  // namespace attnbench
