// The ranges record_schema_problem() holds a record to, beyond its keys and types: what a resumed
// run, a merge and `append` (which checks the record it makes) rely on.
#include "harness/results/record_check.h"

#include <catch2/catch.hpp>

namespace attnbench {
namespace {

TEST_CASE("a record's index, device, time and flops must be in range", "[hostile][record]") {
  const auto ok = nlohmann::ordered_json::parse(
      R"({"case_index":0,"case_id":"a","variant":"naive","device":"cuda","status":"ok",)"
      R"("flops":1,"time_ms_median":2})");
  REQUIRE(record_schema_problem(ok).empty());
  auto changed = [&ok](const char* key, const nlohmann::ordered_json& value) {
    auto record = ok;
    record[key] = value;
    return record_schema_problem(record);
  };
  CHECK(changed("case_index", -1) == "'case_index' is -1, below 0");
  CHECK(changed("device", "tpu") == "'device' is \"tpu\", not \"cpu\" or \"cuda\"");
  CHECK(changed("device", 3) == "'device' is 3, not \"cpu\" or \"cuda\"");
  CHECK(changed("time_ms_median", 0) == "'time_ms_median' is 0; an ok record's time is above 0");
  CHECK(changed("time_ms_median", -5.0) ==
        "'time_ms_median' is -5; an ok record's time is above 0");
  CHECK(changed("flops", -1) == "'flops' is -1, below 0");
  // Rates, ratios and errors: a negative one passed as any finite number, and the plots' log axes
  // could not place it.
  CHECK(changed("gflops", -1) == "'gflops' is -1, below 0");
  CHECK(changed("cv", -0.5) == "'cv' is -0.5, below 0");
  CHECK(changed("oracle_rel_l2_err", -1e-9) == "'oracle_rel_l2_err' is -1e-09, below 0");
  CHECK(changed("gflops", 0).empty());
  CHECK(changed("gflops", nullptr).empty());
  // A skipped or failed record has no time to check.
  auto skipped = ok;
  skipped["status"] = "skipped";
  skipped["time_ms_median"] = nullptr;
  CHECK(record_schema_problem(skipped).empty());
}

TEST_CASE("a record's times must be in order around the median", "[hostile][record]") {
  const auto ok = nlohmann::ordered_json::parse(
      R"({"case_index":0,"case_id":"a","variant":"naive","status":"ok","flops":1,)"
      R"("time_ms_median":2,"time_ms_min":1,"time_ms_max":3,"ci_low_ms":1.5,"ci_high_ms":2.5})");
  REQUIRE(record_schema_problem(ok).empty());
  auto changed = [&ok](std::initializer_list<std::pair<const char*, double>> values) {
    auto record = ok;
    for (const auto& [key, value] : values) record[key] = value;
    return record_schema_problem(record);
  };
  // An interval whose ends are swapped read as "faster" beside an equal median (compare).
  CHECK(changed({{"ci_low_ms", 50}, {"ci_high_ms", 10}}) ==
        "'ci_low_ms' is 50, above 'ci_high_ms' 10");
  CHECK(changed({{"time_ms_min", 100}}) == "'time_ms_min' is 100, above 'time_ms_max' 3");
  CHECK(changed({{"time_ms_median", 50}}) == "'time_ms_max' is 3, below 'time_ms_median' 50");
  CHECK(changed({{"time_ms_median", 0.5}}) == "'time_ms_min' is 1, above 'time_ms_median' 0.5");
  CHECK(changed({{"ci_high_ms", 1.9}}) == "'ci_high_ms' is 1.9, below 'time_ms_median' 2");
  // Equal ends are in order (one sample; a run of identical times).
  CHECK(changed({{"time_ms_min", 2}, {"time_ms_max", 2}, {"ci_low_ms", 2}, {"ci_high_ms", 2}})
            .empty());
}

}  // namespace
}  // namespace attnbench
