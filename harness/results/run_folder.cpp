#include "harness/results/run_folder.h"

#include <csv.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include "harness/core/record.h"
#include "harness/results/atomic_file.h"
#include "harness/results/json_file.h"
#include "harness/results/record_check.h"
#include "harness/results/record_upgrade.h"
#include "harness/results/regular_file.h"

namespace attnbench {

namespace fs = std::filesystem;

namespace {

constexpr const char* manifest_file = "manifest.json";
constexpr const char* records_file = "cases.jsonl";
// Records of failed cases set aside by a resumed run that retries them.
constexpr const char* attempts_file = "failed_attempts.jsonl";
constexpr const char* summary_file = "summary.csv";
// One line per peak check, all sessions (peak_checks.h).
constexpr const char* peaks_file = "peaks.jsonl";
// Present only while set_aside_failed_records() moves records: the size failed_attempts.jsonl
// had before the move.
constexpr const char* moving_journal = "failed_attempts.jsonl.moving";

// Strings in records and manifests come from outside (error messages, environment variables,
// host names); invalid UTF-8 among them is replaced rather than failing the dump.
std::string dump(const nlohmann::ordered_json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

bool is_leftover_temporary(const std::string& name) {
  // Every file of the folder written whole through write_file_atomically().
  for (const char* target :
       {manifest_file, summary_file, records_file, peaks_file, moving_journal}) {
    // "X.tmp" is what versions before write_file_atomically() left behind.
    if (name == std::string(target) + ".tmp" || attnbench::is_leftover_temporary(name, target))
      return true;
  }
  return false;
}

// A folder can be (re)used for a new run when it holds no results: nothing but an empty
// cases.jsonl and peaks.jsonl and temporaries of writes that never finished (a full disk, a kill).
bool holds_results(const fs::path& folder) {
  for (const fs::directory_entry& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (is_leftover_temporary(name)) continue;
    std::error_code error;
    if ((name == records_file || name == peaks_file) && entry.is_regular_file() &&
        entry.file_size(error) == 0 && !error)
      continue;
    return true;
  }
  return false;
}

void remove_leftover_temporaries(const fs::path& folder) {
  for (const fs::directory_entry& entry : fs::directory_iterator(folder)) {
    std::error_code ignored;
    if (is_leftover_temporary(entry.path().filename().string())) fs::remove(entry.path(), ignored);
  }
}

// What is read of a folder into memory is bounded: a manifest lists the cases' ids, a records
// file holds a few kilobytes per case.
constexpr uint64_t max_manifest_bytes = uint64_t{64} << 20;
constexpr uint64_t max_records_bytes = uint64_t{256} << 20;

// Empty when the fields attnbench reads back from a manifest have their types; else the first
// that does not, e.g. "plan.case_ids[3] is not a string".
std::string manifest_problem(const nlohmann::ordered_json& manifest) {
  using json = nlohmann::ordered_json;
  if (!manifest.is_object()) return "not a JSON object";
  auto wrong = [](const json& object, const char* key, bool (json::*is)() const noexcept) {
    return object.contains(key) && !object[key].is_null() && !(object[key].*is)();
  };
  for (const char* key : {"name", "shard", "git_commit", "node"})
    if (wrong(manifest, key, &json::is_string)) return fmt::format("'{}' is not a string", key);
  if (manifest.contains("schema_version")) {
    const json& version = manifest["schema_version"];
    if (!(version.is_number_integer() && version >= 0))
      return "'schema_version' is not a version number";
  }
  for (const char* key : {"config", "machine", "gpu", "plan", "peaks"})
    if (wrong(manifest, key, &json::is_object)) return fmt::format("'{}' is not an object", key);
  if (manifest.contains("machine") && manifest["machine"].is_object()) {
    for (const char* key : {"cpu_model", "description", "hostname"})
      if (wrong(manifest["machine"], key, &json::is_string))
        return fmt::format("'machine.{}' is not a string", key);
  }
  if (manifest.contains("plan") && manifest["plan"].is_object()) {
    const json& plan = manifest["plan"];
    if (wrong(plan, "shard", &json::is_string)) return "'plan.shard' is not a string";
    if (plan.contains("sweep_cases") &&
        !(plan["sweep_cases"].is_number_integer() && plan["sweep_cases"].get<int64_t>() >= 0))
      return "'plan.sweep_cases' is not a count";
    if (plan.contains("case_ids")) {
      if (!plan["case_ids"].is_array()) return "'plan.case_ids' is not an array";
      for (std::size_t i = 0; i < plan["case_ids"].size(); ++i)
        if (!plan["case_ids"][i].is_string())
          return fmt::format("'plan.case_ids[{}]' is not a string", i);
    }
  }
  return {};
}

nlohmann::ordered_json read_manifest(const fs::path& folder) {
  const fs::path path = folder / manifest_file;
  std::error_code error;
  if (!fs::exists(fs::symlink_status(path, error))) {
    throw std::runtime_error(fmt::format(
        "{}: no {} (not a results folder, or its run never started: run it again without "
        "--resume)",
        folder.string(), manifest_file));
  }
  nlohmann::ordered_json manifest =
      read_json_file(path.string(), max_manifest_bytes, "results manifest");
  if (const std::string problem = manifest_problem(manifest); !problem.empty())
    throw std::runtime_error(fmt::format("{}: malformed manifest: {}", path.string(), problem));
  // Compared as JSON numbers: a version past int's range must not wrap into an old one.
  if (manifest.contains("schema_version") && manifest["schema_version"] > kSchemaVersion) {
    throw std::runtime_error(fmt::format(
        "{}: written with record schema version {}, newer than this attnbench reads (up to {}): "
        "read it with a newer attnbench",
        path.string(), manifest["schema_version"].dump(), kSchemaVersion));
  }
  return manifest;
}

// The files a run appends to or replaces besides those read here: a FIFO would block the
// append, a device would take the data.
void require_regular_folder_files(const fs::path& folder) {
  for (const char* name : {attempts_file, summary_file})
    require_regular_or_absent((folder / name).string());
}

// The files a run appends to (new or resumed) must be its own: appending through a symbolic link
// writes into the file it names (another run's cases.jsonl took this run's records, and this run
// counted that run's as finished), and through a second hard link (a copy made with `cp -al`) into
// every copy at once, leaving the copies' summaries behind their records.
void require_own_appended_files(const fs::path& folder) {
  for (const char* name : {records_file, peaks_file, attempts_file}) {
    const fs::path file = folder / name;
    struct stat status {};
    if (::lstat(file.c_str(), &status) != 0) continue;  // absent: created when first appended
    if (S_ISLNK(status.st_mode)) {
      throw std::runtime_error(fmt::format(
          "{}: a symbolic link: a run appends to it, which would change the file it names; "
          "use a folder whose files are its own (copy one with cp -r, not cp -s)",
          file.string()));
    }
    if (S_ISREG(status.st_mode) && status.st_nlink > 1) {
      throw std::runtime_error(
          fmt::format("{}: {} hard links: a run appends to it, which would change every copy; "
                      "use a folder whose files are its own (copy one with cp -r, not cp -al)",
                      file.string(), static_cast<uint64_t>(status.st_nlink)));
    }
  }
}

// One line of a .jsonl file (cases.jsonl, peaks.jsonl) parsed; a syntax error is one line naming
// the file, the line, what the line holds and what is wrong.
nlohmann::ordered_json parse_jsonl_line(const std::string& line, const fs::path& path,
                                        int line_number, const char* what) {
  try {
    return parse_json_within_depth<nlohmann::ordered_json>(line);
  } catch (const JsonTooDeep& error) {
    throw std::runtime_error(
        fmt::format("{}:{}: malformed {} ({})", path.string(), line_number, what, error.what()));
  } catch (const nlohmann::json::exception& error) {
    throw std::runtime_error(fmt::format("{}:{}: malformed {} (not JSON: {})", path.string(),
                                         line_number, what, json_syntax_problem(error)));
  }
}

// Reads cases.jsonl. A final line without its newline is kept when it is whole JSON (only the
// newline was lost; `repair` adds it) and is then checked as every line is; it is dropped when it
// was cut short by a kill (`repair` truncates the file to the last complete record).
std::vector<nlohmann::ordered_json> read_records(const fs::path& folder, bool repair) {
  const fs::path path = folder / records_file;
  std::vector<nlohmann::ordered_json> records;
  std::error_code missing;
  if (!fs::exists(fs::symlink_status(path, missing))) return records;
  const std::string text =
      read_regular_file(path.string(), max_records_bytes, "records file (cases.jsonl)");
  std::size_t complete = 0;
  int line_number = 0;
  std::map<std::string, int> first_line_of;  // case_id -> its line
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    const bool last_unterminated = end == std::string::npos;
    if (last_unterminated) {
      end = text.size();
      if (nlohmann::ordered_json::parse(text.substr(start), nullptr, false).is_discarded())
        break;  // cut short by a kill
    }
    ++line_number;
    const std::string line = text.substr(start, end - start);
    if (!line.empty()) {
      nlohmann::ordered_json record = parse_jsonl_line(line, path, line_number, "record");
      if (const std::string problem = record_schema_problem(record); !problem.empty()) {
        throw std::runtime_error(
            fmt::format("{}:{}: malformed record: {}", path.string(), line_number, problem));
      }
      // A case is recorded once: a second line of it would be counted twice by every reader.
      const auto [first, added] =
          first_line_of.emplace(record["case_id"].get<std::string>(), line_number);
      if (!added) {
        throw std::runtime_error(fmt::format("{}:{}: case {} is recorded twice (first at line {})",
                                             path.string(), line_number, first->first,
                                             first->second));
      }
      records.push_back(std::move(record));
    }
    if (last_unterminated) {
      complete = text.size();
      if (repair) std::ofstream(path, std::ios::app | std::ios::binary) << '\n';
      break;
    }
    complete = end + 1;
    start = end + 1;
  }
  if (repair && complete < text.size()) fs::resize_file(path, complete);
  return records;
}

// Reads peaks.jsonl as read_records reads cases.jsonl: a last line cut short by a kill is dropped
// (`repair` truncates it off), a damaged line is an error naming the file and line. A folder
// without peaks.jsonl was written before it existed: its checks are the manifest's peak_checks.
PeakChecks read_peak_checks(const fs::path& folder, const nlohmann::ordered_json& manifest,
                            bool repair) {
  const fs::path path = folder / peaks_file;
  std::error_code missing;
  if (!fs::exists(fs::symlink_status(path, missing)))
    return PeakChecks::from_json(manifest.value("peak_checks", nlohmann::ordered_json()));
  const std::string text =
      read_regular_file(path.string(), max_records_bytes, "peak checks file (peaks.jsonl)");
  PeakChecks checks;
  std::size_t complete = 0;
  int line_number = 0;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = text.find('\n', start);
    if (end == std::string::npos) break;  // cut short by a kill: the check is taken again
    ++line_number;
    const std::string line = text.substr(start, end - start);
    if (!line.empty()) {
      const nlohmann::ordered_json parsed = parse_jsonl_line(line, path, line_number, "peak check");
      if (!parsed.is_object()) {
        throw std::runtime_error(fmt::format("{}:{}: malformed peak check (not a JSON object)",
                                             path.string(), line_number));
      }
      if (const std::string problem = PeakCheck::problem(parsed); !problem.empty()) {
        throw std::runtime_error(
            fmt::format("{}:{}: malformed peak check: {}", path.string(), line_number, problem));
      }
      checks.add(PeakCheck::from_json(parsed));
    }
    complete = end + 1;
    start = end + 1;
  }
  if (repair && complete < text.size()) fs::resize_file(path, complete);
  return checks;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool is_failed_record(const nlohmann::ordered_json& record) {
  return record.is_object() && record.value("status", "") == "failed";
}

std::string csv_field(const nlohmann::ordered_json& value) {
  if (value.is_null()) return "";
  const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted(text.size() * 2 + 2, '\0');
  quoted.resize(csv_write(quoted.data(), quoted.size(), text.data(), text.size()));
  return quoted;
}

// Appends `line` (whole records, each ending in a newline) to folder/name, flushed to disk.
void append_line(const std::string& folder, const char* name, const std::string& line) {
  const std::string file = (fs::path(folder) / name).string();
  // One write of the whole line, then fsync: a kill leaves whole records plus at most one
  // partial last line, which open_existing() drops. A failed write (a full disk) is cut back
  // off, so the file never ends in half a record.
  // O_NOFOLLOW: never through a link (require_own_appended_files says why).
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0)
    throw std::runtime_error(fmt::format("{}: cannot append: {}", file, std::strerror(errno)));
  const off_t size_before = ::lseek(fd, 0, SEEK_END);
  int error = 0;
  if (!write_all(fd, line) || ::fsync(fd) != 0) error = errno;
  if (error != 0 && size_before >= 0) ::ftruncate(fd, size_before);
  ::close(fd);
  if (error != 0)
    throw std::runtime_error(fmt::format("{}: cannot append: {}", file, std::strerror(error)));
}

}  // namespace

RunFolder RunFolder::create(const std::string& path) {
  std::error_code error;
  if (fs::exists(path, error) && !fs::is_directory(path, error))
    throw std::runtime_error(
        fmt::format("{}: exists and is not a folder; choose another --out", path));
  fs::create_directories(path, error);
  if (error)
    throw std::runtime_error(
        fmt::format("{}: cannot create the results folder: {}", path, error.message()));
  RunFolder folder(path);
  folder.lock_ = FolderLock::acquire(path);  // before looking inside: another run may be starting
  if (holds_results(path)) {
    throw std::runtime_error(fmt::format(
        "{}: already exists; pass --resume to finish it, or choose another --out", path));
  }
  require_own_appended_files(path);  // a link left in an empty --out, as on a resume
  remove_leftover_temporaries(path);
  for (const char* name : {records_file, peaks_file}) {
    std::ofstream touch(fs::path(path) / name, std::ios::app);
    if (!touch) throw std::runtime_error(fmt::format("{}: results folder is not writable", path));
  }
  return folder;
}

RunFolder RunFolder::create(const std::string& path, const nlohmann::ordered_json& manifest) {
  RunFolder folder = create(path);
  folder.write_manifest(manifest);
  return folder;
}

RunFolder RunFolder::open_existing(const std::string& path) {
  if (!fs::is_directory(path))
    throw std::runtime_error(fmt::format("{}: no such results folder to resume", path));
  RunFolder folder(path);
  folder.lock_ = FolderLock::acquire(path);
  require_own_appended_files(path);
  folder.manifest_ = read_manifest(path);
  folder.records_ = read_records(path, true);
  require_regular_folder_files(path);
  folder.finish_interrupted_move();
  remove_leftover_temporaries(path);
  folder.peak_checks_ = read_peak_checks(path, folder.manifest_, true);
  if (!fs::exists(fs::path(path) / peaks_file)) {
    // Written before peaks.jsonl: its checks move there, so that this session's join them.
    std::string text;
    for (const PeakCheck& check : folder.peak_checks_.checks())
      text += dump(check.to_json(), -1) + "\n";
    write_file_atomically((fs::path(path) / peaks_file).string(), text);
  }
  return folder;
}

RunFolder RunFolder::open_read_only(const std::string& path) {
  if (!fs::is_directory(path))
    throw std::runtime_error(fmt::format("{}: no such results folder", path));
  RunFolder folder(path);
  folder.manifest_ = read_manifest(path);
  folder.records_ = read_records(path, false);
  folder.peak_checks_ = read_peak_checks(path, folder.manifest_, false);
  require_regular_folder_files(path);
  return folder;
}

std::set<std::string> RunFolder::finished_case_ids() const {
  std::set<std::string> ids;
  for (const auto& record : records_) ids.insert(record.at("case_id").get<std::string>());
  return ids;
}

void RunFolder::write_manifest(const nlohmann::ordered_json& manifest) {
  manifest_ = manifest;
  write_file_atomically((fs::path(path_) / manifest_file).string(), dump(manifest, 2) + "\n");
}

void RunFolder::append(const nlohmann::ordered_json& record) {
  append_line(path_, records_file, dump(record, -1) + "\n");
  records_.push_back(record);
}

std::vector<nlohmann::ordered_json> RunFolder::rated_records() const {
  std::vector<nlohmann::ordered_json> rated;
  rated.reserve(records_.size());
  for (const auto& record : records_)
    rated.push_back(rate_record(upgrade_record(record), peak_checks_));
  return rated;
}

void RunFolder::append_peak_check(const PeakCheck& check) {
  append_line(path_, peaks_file, dump(check.to_json(), -1) + "\n");
  peak_checks_.add(check);
}

void RunFolder::finish_interrupted_move() {
  const fs::path journal = fs::path(path_) / moving_journal;
  if (!fs::exists(journal)) return;
  // cases.jsonl still holds failed records: the kill came before its rewrite, so whatever the
  // move appended to failed_attempts.jsonl is still in cases.jsonl too; cut it back off (the
  // next move appends it again). Otherwise the move was complete but for removing the journal.
  const bool rewritten = std::none_of(records_.begin(), records_.end(), is_failed_record);
  if (!rewritten) {
    const std::string size_text = read_text(journal);
    char* end = nullptr;
    const unsigned long long size_before = std::strtoull(size_text.c_str(), &end, 10);
    const fs::path attempts = fs::path(path_) / attempts_file;
    std::error_code error;
    if (end != size_text.c_str() && fs::exists(attempts) &&
        fs::file_size(attempts, error) > size_before && !error)
      fs::resize_file(attempts, size_before);
  }
  fs::remove(journal);
}

int64_t RunFolder::set_aside_failed_records() {
  // Line by line as the file holds them: the lines that stay are written back byte for byte.
  const std::string text = read_text(fs::path(path_) / records_file);
  std::string kept_lines, failed_lines;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    const auto record = nlohmann::ordered_json::parse(line, nullptr, false);
    (is_failed_record(record) ? failed_lines : kept_lines) += line + "\n";
  }
  const auto before = records_.size();
  records_.erase(std::remove_if(records_.begin(), records_.end(), is_failed_record),
                 records_.end());
  const auto moved = static_cast<int64_t>(before - records_.size());
  if (moved == 0) return 0;
  const fs::path attempts = fs::path(path_) / attempts_file;
  std::error_code error;
  const std::uintmax_t attempts_size = fs::exists(attempts) ? fs::file_size(attempts, error) : 0;
  const std::string journal = (fs::path(path_) / moving_journal).string();
  write_file_atomically(journal, std::to_string(error ? 0 : attempts_size) + "\n");
  // The failed records are safe in failed_attempts.jsonl before cases.jsonl loses them: a kill in
  // between leaves them in both, and the journal tells open_existing() to cut the copy back off.
  append_line(path_, attempts_file, failed_lines);
  write_file_atomically((fs::path(path_) / records_file).string(), kept_lines);
  fs::remove(journal);
  return moved;
}

std::vector<nlohmann::ordered_json> RunFolder::rated_records_by_case() const {
  std::vector<nlohmann::ordered_json> rated = rated_records();
  std::stable_sort(rated.begin(), rated.end(), [](const auto& a, const auto& b) {
    return a.value("case_index", 0) < b.value("case_index", 0);
  });
  return rated;
}

std::string RunFolder::summary_csv() const {
  std::string text;
  const auto& fields = csv_fields();
  for (std::size_t i = 0; i < fields.size(); ++i) text += (i ? "," : "") + fields[i];
  text += "\n";
  for (const nlohmann::ordered_json& record : rated_records_by_case()) {
    for (std::size_t i = 0; i < fields.size(); ++i) {
      text +=
          (i ? "," : "") + csv_field(record.contains(fields[i]) ? record.at(fields[i]) : nullptr);
    }
    text += "\n";
  }
  return text;
}

void RunFolder::write_summary_csv() const {
  write_file_atomically((fs::path(path_) / summary_file).string(), summary_csv());
}

}  // namespace attnbench
