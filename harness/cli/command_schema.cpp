// attnbench schema [--json]: the fields of a record (cases.jsonl, summary.csv), with their types
// and meaning, from the one table in harness/core/record.cpp.
#include <fmt/format.h>

#include <memory>

#include "harness/cli/commands.h"
#include "harness/core/record.h"

namespace attnbench {

void add_schema_command(CLI::App& app, int& exit_code) {
  CLI::App* schema = app.add_subcommand("schema", "List the fields of a result record");
  auto as_json = std::make_shared<bool>(false);
  schema->add_flag("--json", *as_json, "Print JSON instead of a table");
  schema->callback([as_json, &exit_code] {
    if (*as_json) {
      fmt::print("{}\n", schema_json().dump(2));
    } else {
      fmt::print("record schema version {}\n", kSchemaVersion);
      for (const RecordField& field : record_schema())
        fmt::print("{:<24} {:<13} {}\n", field.name, field.type, field.description);
    }
    exit_code = 0;
  });
}

}  // namespace attnbench
