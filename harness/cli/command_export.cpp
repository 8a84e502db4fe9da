// attnbench export DIR [--csv]: a results folder's records as every reader should see them,
// rated against the folder's peak checks by the one rater (rate_record), so a script in any
// language reads GFLOP/s, % of peak and the disturbed flag without rating anything itself.
// JSON (the default): {"folder", "manifest", "schema_version", "fields": the schema, "peak_checks":
// the folder's checks, "peak_check_summary": what they say together (PeakChecks::summary_json),
// "records": [...]} with the records in case order, each upgraded to this schema version and
// rated; --csv: summary.csv's columns and rows. The folder is read, not changed.
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "harness/cli/commands.h"
#include "harness/core/record.h"
#include "harness/results/reader_check.h"
#include "harness/results/run_folder.h"

namespace attnbench {

void add_export_command(CLI::App& app, int& exit_code) {
  auto folder_path = std::make_shared<std::string>();
  auto as_csv = std::make_shared<bool>(false);
  CLI::App* command = app.add_subcommand(
      "export", "Print a results folder's records, rated against its peak checks (JSON or CSV)");
  command->add_option("folder", *folder_path, "A results folder (with manifest.json)")->required();
  command->add_flag("--csv", *as_csv, "Print summary.csv's columns instead of JSON");
  command->callback([folder_path, as_csv, &exit_code] {
    const RunFolder folder = RunFolder::open_read_only(*folder_path);
    if (const std::string problem = manifest_reader_problem(folder.manifest()); !problem.empty())
      throw std::runtime_error(fmt::format("{}/manifest.json: not a manifest readers can show: {}",
                                           folder.path(), problem));
    if (*as_csv) {
      fmt::print("{}", folder.summary_csv());
    } else {
      nlohmann::ordered_json out;
      out["folder"] = folder.path();
      out["manifest"] = folder.manifest();
      const nlohmann::ordered_json schema = schema_json();
      out["schema_version"] = schema["schema_version"];
      out["fields"] = schema["fields"];
      out["peak_checks"] = folder.peak_checks().to_json();
      out["peak_check_summary"] = folder.peak_checks().summary_json();
      out["records"] = folder.rated_records_by_case();
      for (const nlohmann::ordered_json& record : out["records"])
        if (const std::string problem = record_reader_problem(record); !problem.empty())
          throw std::runtime_error(fmt::format("{}/cases.jsonl: case {}: {}", folder.path(),
                                               record["case_index"].dump(), problem));
      fmt::print("{}\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
    std::fflush(stdout);
    exit_code = 0;
  });
}

}  // namespace attnbench
