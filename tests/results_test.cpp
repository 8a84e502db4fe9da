// The results formats: records, summary.csv, the run folder's crash safety, and merging shards.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "harness/core/record.h"
#include "harness/measure/timing.h"
#include "harness/results/run_folder.h"
#include "harness/results/sharded_run.h"
#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

namespace fs = std::filesystem;

// A fresh, empty folder path under the system temp directory.
std::string temporary_path(const std::string& name) {
  static std::mt19937_64 rng(std::random_device{}());
  const fs::path path =
      fs::temp_directory_path() / fmt::format("attnbench-test-{}-{:x}", name, rng());
  fs::remove_all(path);
  return path.string();
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

CaseRecord sample_record(int64_t index, CaseStatus status) {
  CaseRecord r;
  r.sweep_case.index = index;
  r.sweep_case.variant = "naive";
  r.sweep_case.shape =
      testing::make_shape(1, 2, 2, 64 << index, 64 << index, 32, 32, index % 2 == 1);
  r.sweep_case.id = case_id(r.sweep_case.variant, r.sweep_case.shape);
  r.work = count_work(r.sweep_case.shape);
  r.status = status;
  r.peak_gflops = 100;
  if (status == CaseStatus::ok) {
    r.timing = summarise({2.0, 1.0, 3.0});
    r.oracle = OracleReport{};
    r.oracle->passed = true;
    r.oracle->rel_l2_err = 1e-7;
    r.workspace_bytes = 4096;
  } else {
    r.reason = "a reason, with a comma";
  }
  return r;
}

TEST_CASE("a record stores every field but the derived ones, computed from the median",
          "[results]") {
  const auto j = to_json(sample_record(0, CaseStatus::ok));
  std::size_t stored = 0;
  for (const RecordField& field : record_schema()) {
    CHECK(j.contains(field.name) != field.derived);
    stored += field.derived ? 0 : 1;
  }
  CHECK(j.size() == stored);
  CHECK(j["time_ms_median"] == 2.0);
  CHECK(j["gflops"].get<double>() == Approx(j["flops"].get<double>() / 2e-3 / 1e9));
  CHECK(j["status"] == "ok");
  const auto rated = rate_record(j, PeakChecks{});  // its own peak of 100: no check measures it
  CHECK(rated.size() == record_fields().size());
  CHECK(rated["percent_of_peak"].get<double>() == Approx(j["gflops"].get<double>()));
}

TEST_CASE("a skipped record has its reason and null timings", "[results]") {
  const auto j = to_json(sample_record(1, CaseStatus::skipped));
  CHECK(j["status"] == "skipped");
  CHECK(j["reason"] == "a reason, with a comma");
  CHECK(j["time_ms_median"].is_null());
  CHECK(j["gflops"].is_null());
  CHECK(j["flop_convention"] == "causal: unmasked pairs only");
}

TEST_CASE("summary.csv: a header of every field, one row per record, quoting where needed",
          "[results]") {
  const std::string path = temporary_path("csv");
  RunFolder folder = RunFolder::create(path, {{"name", "t"}});
  folder.append(to_json(sample_record(1, CaseStatus::skipped)));
  folder.append(to_json(sample_record(0, CaseStatus::ok)));
  folder.write_summary_csv();
  std::istringstream csv(read_file(fs::path(path) / "summary.csv"));
  std::string header, first, second;
  std::getline(csv, header);
  std::getline(csv, first);
  std::getline(csv, second);
  CHECK(header.rfind("case_index,case_id,variant,device", 0) == 0);
  CHECK(std::count(header.begin(), header.end(), ',') ==
        static_cast<long>(csv_fields().size() - 1));
  // Arrays stay in cases.jsonl; every other field is a column.
  CHECK(header.find("round_times_ms") == std::string::npos);
  CHECK(csv_fields().size() == record_fields().size() - 1);
  CHECK(first.rfind("0,naive|", 0) == 0);  // sorted by case index
  CHECK_THAT(second, Catch::Contains("\"a reason, with a comma\""));
  fs::remove_all(path);
}

TEST_CASE("a timed record carries the median's interval and its rounds", "[results]") {
  CaseRecord r = sample_record(0, CaseStatus::ok);
  r.timing = summarise({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  r.timing->repetition_means_ms = {5.0, 6.0};
  auto j = to_json(r);
  CHECK(j["ci_low_ms"] == 2.0);
  CHECK(j["ci_high_ms"] == 9.0);
  CHECK(j["rel_ci_half_width"].get<double>() == Approx(3.5 / 5.5));
  CHECK(j["iterations"] == 10);
  CHECK(j["round_times_ms"] == nlohmann::ordered_json({5.0, 6.0}));
  CHECK(j["target_rel_ci"].is_null());  // no target was set
  CHECK(j["target_reached"].is_null());
  CHECK(j["interleaved"] == false);
  CHECK(j["runs_per_sample"] == 1);

  r.timing->target_rel_ci = 0.02;
  r.timing->interleaved = true;
  r.timing->runs_per_sample = 37;
  j = to_json(r);
  CHECK(j["runs_per_sample"] == 37);
  CHECK(j["target_rel_ci"] == 0.02);
  CHECK(j["target_reached"] == false);
  CHECK(j["interleaved"] == true);

  r.timing = summarise({1, 2, 3});  // too few samples for a 95% interval
  CHECK(to_json(r)["ci_low_ms"].is_null());
  CHECK(to_json(r)["rel_ci_half_width"].is_null());
}

PeakCheck fma_check(const std::string& when, double gflops) {
  PeakCheck check;
  check.when = when;
  check.cpu_fma_gflops = gflops;
  check.cpu_fma_sustained_gflops = gflops;
  return check;
}

TEST_CASE("records are rated against the folder's peak checks, every session's", "[results]") {
  const std::string path = temporary_path("peaks");
  CaseRecord r = sample_record(0, CaseStatus::ok);
  r.peak_gflops = 0;
  r.peak_name = "cpu_fma_gflops";
  {
    RunFolder folder = RunFolder::create(path, {{"name", "t"}});
    folder.append_peak_check(fma_check("start", 0.1));
    folder.append(to_json(r));
  }
  const std::string first_session = read_file(fs::path(path) / "cases.jsonl");
  {
    RunFolder resumed = RunFolder::open_existing(path);
    resumed.append_peak_check(fma_check("resume", 0.4));
    resumed.write_summary_csv();
  }
  // Not a byte of the record changed; its rating did.
  CHECK(read_file(fs::path(path) / "cases.jsonl") == first_session);
  const RunFolder reopened = RunFolder::open_read_only(path);
  REQUIRE(reopened.peak_checks().checks().size() == 2);
  CHECK(reopened.rated_records()[0]["peak_gflops"] == 0.4);
  CHECK_THAT(read_file(fs::path(path) / "summary.csv"), Catch::Contains(",0.4,cpu_fma_gflops,"));
  fs::remove_all(path);
}

TEST_CASE("a peak check cut short by a kill is dropped, a folder before peaks.jsonl gets one",
          "[results]") {
  const std::string path = temporary_path("peaks-old");
  {
    RunFolder folder = RunFolder::create(path, {{"name", "t"}});
    folder.append_peak_check(fma_check("start", 100));
  }
  std::ofstream(fs::path(path) / "peaks.jsonl", std::ios::app) << "{\"when\": \"end\", \"cpu_fm";
  CHECK(RunFolder::open_read_only(path).peak_checks().checks().size() == 1);
  RunFolder::open_existing(path);
  CHECK(read_file(fs::path(path) / "peaks.jsonl").back() == '\n');

  // Written before peaks.jsonl: the manifest's list is its checks, and moves to peaks.jsonl.
  fs::remove(fs::path(path) / "peaks.jsonl");
  PeakChecks old;
  old.add(fma_check("start", 60));
  old.add(fma_check("end", 120));
  {
    RunFolder::open_existing(path).write_manifest({{"name", "t"}, {"peak_checks", old.to_json()}});
  }
  fs::remove(fs::path(path) / "peaks.jsonl");  // opening it made an empty one
  CHECK(RunFolder::open_read_only(path).peak_checks().best("cpu_fma_gflops") == 120);
  { RunFolder resumed = RunFolder::open_existing(path); }
  CHECK(fs::exists(fs::path(path) / "peaks.jsonl"));
  CHECK(RunFolder::open_read_only(path).peak_checks().checks().size() == 2);
  fs::remove_all(path);
}

TEST_CASE("opening a run removes every temporary a killed write left", "[results]") {
  const std::string path = temporary_path("leftovers");
  RunFolder::create(path, {{"name", "t"}});
  const std::vector<std::string> leftovers = {"cases.jsonl.tmp.a1B2c3",
                                              "manifest.json.tmp.XyZ123",
                                              "summary.csv.tmp.000000",
                                              "peaks.jsonl.tmp.qwerty",
                                              "failed_attempts.jsonl.moving.tmp.abcdef",
                                              "manifest.json.tmp"};
  for (const std::string& name : leftovers) std::ofstream(fs::path(path) / name) << "partial";
  std::ofstream(fs::path(path) / "notes.txt") << "the user's";
  { RunFolder::open_existing(path); }
  for (const std::string& name : leftovers) CHECK_FALSE(fs::exists(fs::path(path) / name));
  CHECK(fs::exists(fs::path(path) / "notes.txt"));
  fs::remove_all(path);
}

TEST_CASE("moving failed records aside keeps the others byte for byte and never doubles one",
          "[results]") {
  const std::string path = temporary_path("set-aside");
  {
    RunFolder folder = RunFolder::create(path, {{"name", "t"}});
    folder.append(to_json(sample_record(0, CaseStatus::ok)));
    folder.append(to_json(sample_record(1, CaseStatus::failed)));
    folder.append(to_json(sample_record(2, CaseStatus::skipped)));
  }
  const fs::path cases = fs::path(path) / "cases.jsonl";
  const fs::path attempts = fs::path(path) / "failed_attempts.jsonl";
  const std::string all = read_file(cases);
  std::vector<std::string> lines;
  std::istringstream split(all);
  for (std::string line; std::getline(split, line);) lines.push_back(line + "\n");
  REQUIRE(lines.size() == 3);

  // Killed after failed_attempts.jsonl got the records and before cases.jsonl lost them: the
  // journal says how long failed_attempts.jsonl was before.
  std::ofstream(attempts) << lines[1];
  std::ofstream(fs::path(path) / "failed_attempts.jsonl.moving") << "0\n";
  {
    RunFolder resumed = RunFolder::open_existing(path);
    CHECK_FALSE(fs::exists(fs::path(path) / "failed_attempts.jsonl.moving"));
    CHECK(read_file(attempts).empty());  // cut back: cases.jsonl still holds it
    CHECK(resumed.set_aside_failed_records() == 1);
  }
  CHECK(read_file(cases) == lines[0] + lines[2]);
  CHECK(read_file(attempts) == lines[1]);
  // Again, with nothing failed: nothing moves.
  CHECK(RunFolder::open_existing(path).set_aside_failed_records() == 0);
  CHECK(read_file(attempts) == lines[1]);

  // Killed after the rewrite, before the journal went: the move stands.
  std::ofstream(fs::path(path) / "failed_attempts.jsonl.moving") << "0\n";
  { RunFolder::open_existing(path); }
  CHECK(read_file(attempts) == lines[1]);
  CHECK_FALSE(fs::exists(fs::path(path) / "failed_attempts.jsonl.moving"));
  fs::remove_all(path);
}

TEST_CASE("the manifest is written as given and read back", "[results]") {
  const std::string path = temporary_path("manifest");
  RunFolder::create(path, {{"name", "t"}, {"peaks", {{"cpu_fma_gflops", 123.0}}}});
  const RunFolder reopened = RunFolder::open_existing(path);
  CHECK(reopened.manifest()["peaks"]["cpu_fma_gflops"] == 123.0);
  fs::remove_all(path);
}

TEST_CASE("a folder of a newer record schema is refused, an older or unversioned one read",
          "[results]") {
  const std::string path = temporary_path("schema-version");
  for (const int version : {0, kSchemaVersion}) {
    RunFolder::create(path, {{"name", "t"}, {"schema_version", version}});
    CHECK(RunFolder::open_read_only(path).manifest()["schema_version"] == version);
    fs::remove_all(path);
  }
  RunFolder::create(path, {{"name", "t"}});  // written before the version existed
  CHECK_FALSE(RunFolder::open_read_only(path).manifest().contains("schema_version"));
  fs::remove_all(path);
  RunFolder::create(path, {{"name", "t"}, {"schema_version", kSchemaVersion + 1}});
  CHECK_THROWS_WITH(RunFolder::open_read_only(path),
                    Catch::Contains(fmt::format("record schema version {}, newer than this "
                                                "attnbench reads (up to {})",
                                                kSchemaVersion + 1, kSchemaVersion)));
  CHECK_THROWS_WITH(RunFolder::open_existing(path), Catch::Contains("newer than this attnbench"));
  fs::remove_all(path);
  // Past int's range: compared as a number, not wrapped into an old version.
  RunFolder::create(path, {{"name", "t"}, {"schema_version", (int64_t{1} << 32) + 1}});
  CHECK_THROWS_WITH(RunFolder::open_read_only(path), Catch::Contains("newer than this attnbench"));
  fs::remove_all(path);
  RunFolder::create(path, {{"name", "t"}, {"schema_version", "1"}});
  CHECK_THROWS_WITH(
      RunFolder::open_read_only(path),
      Catch::Contains("malformed manifest: 'schema_version' is not a version number"));
  fs::remove_all(path);
}

TEST_CASE("an existing results folder is never overwritten", "[results]") {
  const std::string path = temporary_path("exists");
  RunFolder::create(path, {{"name", "t"}});
  CHECK_THROWS_WITH(RunFolder::create(path, {{"name", "t"}}), Catch::Contains("already exists"));
  fs::remove_all(path);
}

TEST_CASE("an unwritable results folder is a one-line error", "[results]") {
  CHECK_THROWS_WITH(RunFolder::create("/proc/attnbench-cannot-be-here", {{"name", "t"}}),
                    Catch::Contains("cannot create the results folder"));
}

TEST_CASE("a record cut short by a kill is dropped on resume, whole records are kept",
          "[results]") {
  const std::string path = temporary_path("resume");
  {
    RunFolder folder = RunFolder::create(path, {{"name", "t"}});
    folder.append(to_json(sample_record(0, CaseStatus::ok)));
    folder.append(to_json(sample_record(1, CaseStatus::skipped)));
  }
  {
    std::ofstream partial(fs::path(path) / "cases.jsonl", std::ios::app);
    partial << R"({"case_index":2,"case_id":"naive|half)";  // no newline: killed mid-write
  }
  {
    RunFolder resumed = RunFolder::open_existing(path);
    CHECK(resumed.records().size() == 2);
    CHECK(resumed.finished_case_ids().count(sample_record(1, CaseStatus::ok).sweep_case.id) == 1);
    resumed.append(to_json(sample_record(2, CaseStatus::ok)));
  }  // the folder stays locked while `resumed` lives
  CHECK(RunFolder::open_existing(path).records().size() == 3);
  fs::remove_all(path);
}

TEST_CASE("a malformed cases.jsonl line is an error naming the line", "[results]") {
  const std::string path = temporary_path("malformed");
  RunFolder::create(path, {{"name", "t"}});
  std::ofstream(fs::path(path) / "cases.jsonl")
      << to_json(sample_record(0, CaseStatus::ok)).dump() << "\nnot json\n";
  CHECK_THROWS_WITH(RunFolder::open_existing(path),
                    Catch::Contains("cases.jsonl:2: malformed record"));
  fs::remove_all(path);
}

// A shard's manifest as `run --shard I/N` writes it: the config, the hardware and the case plan.
nlohmann::ordered_json shard_manifest(const std::string& shard,
                                      const std::vector<int64_t>& case_indices, int64_t sweep_cases,
                                      const std::string& cpu = "CPU A") {
  std::vector<Case> cases;
  for (const int64_t index : case_indices)
    cases.push_back(sample_record(index, CaseStatus::ok).sweep_case);
  return {{"name", "t"},
          {"shard", shard},
          {"config", {{"name", "t"}}},
          {"node", "node-" + shard},
          {"machine", {{"cpu_model", cpu}, {"description", cpu + " (2 cores)"}}},
          {"gpu", nullptr},
          {"plan", plan_json(shard, cases, sweep_cases)}};
}

TEST_CASE("merging shards gives every case once, in case order", "[results]") {
  const std::string a = temporary_path("shard-a"), b = temporary_path("shard-b"),
                    out = temporary_path("merged");
  RunFolder shard_a = RunFolder::create(a, shard_manifest("0/2", {0, 2}, 3)),
            shard_b = RunFolder::create(b, shard_manifest("1/2", {1}, 3));
  shard_a.append(to_json(sample_record(0, CaseStatus::ok)));
  shard_b.append(to_json(sample_record(1, CaseStatus::ok)));
  shard_a.append(to_json(sample_record(2, CaseStatus::skipped)));
  merge_runs({a, b}, out);
  const RunFolder merged = RunFolder::open_existing(out);
  REQUIRE(merged.records().size() == 3);
  for (int i = 0; i < 3; ++i) CHECK(merged.records()[i]["case_index"] == i);
  CHECK(fs::exists(fs::path(out) / "summary.csv"));
  CHECK(merged.records()[1]["node"] == "node-1/2");
  CHECK(merged.records()[1]["machine"] == "CPU A (2 cores)");
  CHECK(merged.manifest()["plan"]["case_ids"].size() == 3);

  SECTION("a shard given twice is refused") {
    CHECK_THROWS_WITH(merge_runs({a, a}, temporary_path("dup")),
                      Catch::Contains("are both shard 0/2"));
  }
  SECTION("a missing shard is refused, by name") {
    CHECK_THROWS_WITH(merge_runs({a}, temporary_path("partial")),
                      Catch::Contains("shard 1/2") && Catch::Contains("missing"));
  }
  SECTION("shards from different configs are refused") {
    const std::string c = temporary_path("shard-c");
    nlohmann::ordered_json manifest = shard_manifest("1/2", {1}, 3);
    manifest["config"] = {{"name", "other"}};
    RunFolder::create(c, manifest).append(to_json(sample_record(1, CaseStatus::ok)));
    CHECK_THROWS_WITH(merge_runs({a, c}, temporary_path("mixed")),
                      Catch::Contains("different config"));
    fs::remove_all(c);
  }
  for (const auto& p : {a, b, out}) fs::remove_all(p);
}

TEST_CASE("merge refuses an incomplete shard and keeps a record that lost its newline",
          "[results]") {
  const std::string a = temporary_path("shard-a"), b = temporary_path("shard-b");
  RunFolder::create(a, shard_manifest("0/2", {0, 2}, 3))
      .append(to_json(sample_record(0, CaseStatus::ok)));
  RunFolder::create(b, shard_manifest("1/2", {1}, 3))
      .append(to_json(sample_record(1, CaseStatus::ok)));
  CHECK_THROWS_WITH(merge_runs({a, b}, temporary_path("incomplete")),
                    Catch::Contains("shard 0/2") && Catch::Contains("incomplete") &&
                        Catch::Contains("1 of its 2 cases missing"));

  // The last record is whole; only its newline is gone (a copy or an editor dropped it).
  std::ofstream(fs::path(a) / "cases.jsonl", std::ios::app)
      << to_json(sample_record(2, CaseStatus::ok)).dump();
  const std::string out = temporary_path("merged");
  merge_runs({a, b}, out);
  CHECK(RunFolder::open_existing(out).records().size() == 3);
  RunFolder resumed = RunFolder::open_existing(a);  // repairs the newline, keeps the record
  CHECK(resumed.records().size() == 2);
  CHECK(read_file(fs::path(a) / "cases.jsonl").back() == '\n');
  for (const auto& p : {a, b, out}) fs::remove_all(p);
}

TEST_CASE("merge refuses shards from different CPU models unless mixing is allowed", "[results]") {
  const std::string a = temporary_path("shard-a"), b = temporary_path("shard-b");
  RunFolder::create(a, shard_manifest("0/2", {0}, 2, "CPU A"))
      .append(to_json(sample_record(0, CaseStatus::ok)));
  RunFolder::create(b, shard_manifest("1/2", {1}, 2, "CPU B"))
      .append(to_json(sample_record(1, CaseStatus::ok)));
  CHECK_THROWS_WITH(merge_runs({a, b}, temporary_path("mixed")),
                    Catch::Contains("different hardware") && Catch::Contains("CPU B") &&
                        Catch::Contains("--allow-mixed"));
  const std::string out = temporary_path("merged");
  merge_runs({a, b}, out, true);
  const RunFolder merged = RunFolder::open_existing(out);
  CHECK(merged.records()[0]["machine"] == "CPU A (2 cores)");
  CHECK(merged.records()[1]["machine"] == "CPU B (2 cores)");
  CHECK(merged.manifest()["mixed_hardware"] == true);
  for (const auto& p : {a, b, out}) fs::remove_all(p);
}

}  // namespace
}  // namespace attnbench
