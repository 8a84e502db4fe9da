// The fields a shape is written as, in records (cases.jsonl, summary.csv, `attnbench schema`)
// and in `plan --json`'s cases: one table, so a new field of the shape is written everywhere by
// one row. shape_from_json (case_json.h) reads them back.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "harness/core/shape.h"

namespace attnbench {

struct ShapeField {
  const char* name;
  const char* type;  // JSON type, as record_schema() spells it; "|null" when absent for some
  const char* description;
  nlohmann::ordered_json (*value)(const Shape& shape);
};

// In the order records and plans write them.
const std::vector<ShapeField>& shape_fields();

}  // namespace attnbench
