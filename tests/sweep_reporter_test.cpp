// The sweep runner's events: what a reporter is told, in what order, and that a resumed run tells
// only of the cases it runs. The terminal and the folder are two reporters among any.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "harness/plan/config.h"
#include "harness/plan/sweep.h"
#include "harness/runner/folder_writer.h"
#include "harness/runner/sweep_runner.h"

namespace attnbench {
namespace {

namespace fs = std::filesystem;

// Keeps what it is told, as "started 4/0", "case ID ok", "ended 4".
class RecordingReporter final : public SweepReporter {
 public:
  void run_started(const RunStarted& event) override {
    events.push_back("started " + std::to_string(event.total_cases) + "/" +
                     std::to_string(event.already_done));
    checks_given = event.checks != nullptr;
  }
  void case_finished(const CaseFinished& event) override {
    events.push_back("case " + event.stored->at("case_id").get<std::string>() + " " +
                     to_string(event.record->status));
  }
  void run_ended(const RunEnded& event) override {
    events.push_back("ended " + std::to_string(event.session_records));
    end_checks_given = event.checks != nullptr;
  }
  std::vector<std::string> events;
  bool checks_given = false, end_checks_given = true;
};

SweepConfig small_sweep() {
  return parse_config(
      "name = \"t\"\nvariants = [\"naive\"]\n[axes]\nseq_len = [8, 16]\nd_k = 8\n"
      "mask = [\"none\", \"causal\"]\n[measure]\nwarmup = 0\nrepetitions = 2\nmin_time_s = 0.001\n"
      "peaks = \"skip\"\n",
      "test.toml");
}

std::string scratch_folder(const char* name) {
  const fs::path path = fs::temp_directory_path() / (std::string("attnbench_reporter_") + name);
  fs::remove_all(path);
  return path.string();
}

TEST_CASE("a sweep tells each reporter it started, each case as it finishes, and that it ended",
          "[runner]") {
  const SweepConfig config = small_sweep();
  const std::vector<Case> cases = expand_cases(config, {"naive"});
  REQUIRE(cases.size() == 4);
  const std::string path = scratch_folder("events");
  MeasuredPeaks peaks;
  peaks.skipped = true;
  {
    RunFolder folder = RunFolder::create(path, {{"name", "t"}});
    RecordingReporter recording;
    FolderWriter writer(folder);
    SweepRunner runner(config, peaks);
    const SweepOutcome outcome = runner.run(cases, folder, {&writer, &recording});
    CHECK(outcome.ok == 4);
    REQUIRE(recording.events.size() == 6);
    CHECK(recording.events.front() == "started 4/0");
    for (std::size_t i = 0; i < cases.size(); ++i)
      CHECK(recording.events[i + 1] == "case " + cases[i].id + " ok");
    CHECK(recording.events.back() == "ended 4");
    CHECK(recording.checks_given);
    CHECK_FALSE(recording.end_checks_given);  // peaks skipped: no end check to report
    // The folder writer stored what the recording reporter was told.
    CHECK(folder.finished_case_ids().size() == 4);
    CHECK(fs::exists(fs::path(path) / "summary.csv"));
  }
  {
    // Resumed with two more cases: only those are run and told; the four count as done.
    SweepConfig longer = config;
    longer.axes.set_values("seq_len", Axis{8, 16, 32});
    const std::vector<Case> more = expand_cases(longer, {"naive"});
    REQUIRE(more.size() == 6);
    RunFolder folder = RunFolder::open_existing(path);
    RecordingReporter recording;
    SweepRunner runner(longer, peaks);
    const SweepOutcome outcome = runner.run(more, folder, {&recording});
    CHECK(outcome.already_done == 4);
    CHECK(outcome.ok == 2);
    REQUIRE(recording.events.size() == 4);
    CHECK(recording.events.front() == "started 6/4");
    CHECK(recording.events.back() == "ended 2");
  }
  fs::remove_all(path);
}

}  // namespace
}  // namespace attnbench
