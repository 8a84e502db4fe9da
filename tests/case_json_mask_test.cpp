// A case's mask and modifiers in JSON (plan --json, append) and in the record: written, read back,
// and read from measurements written before masks were an axis.
#include <catch2/catch.hpp>

#include "harness/core/case_json.h"
#include "harness/core/record.h"
#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

Case masked_case(MaskSpec mask, bool alibi, double softcap) {
  Case c;
  c.variant = "naive";
  c.shape = testing::with_mask(testing::make_shape(1, 2, 2, 6, 6, 8, 8, false), std::move(mask),
                               alibi, softcap);
  c.id = case_id(c.variant, c.shape);
  return c;
}

TEST_CASE("case JSON carries the mask, its documents and the modifiers, and reads them back",
          "[case][mask]") {
  for (const Case& c :
       {masked_case(MaskSpec::documents({2, 4}), true, 30),
        masked_case(MaskSpec::window(2), false, 0), masked_case(MaskSpec::causal(), true, 0),
        masked_case(MaskSpec::none(), false, 5)}) {
    INFO(c.id);
    const auto j = case_json(c);
    CHECK(j["mask"] == to_string(c.shape.mask));
    CHECK(j["causal"] == c.shape.causal);
    CHECK(j["alibi"] == c.shape.alibi);
    CHECK(j["softcap"] == c.shape.softcap);
    const Shape back = shape_from_json(nlohmann::json::parse(j.dump()));
    CHECK(back.mask == c.shape.mask);
    CHECK(back.causal == c.shape.causal);
    CHECK(back.alibi == c.shape.alibi);
    CHECK(back.softcap == c.shape.softcap);
  }
  const auto documents = case_json(masked_case(MaskSpec::documents({2, 4}), false, 0));
  CHECK(documents["doc_lens"].get<std::vector<int64_t>>() == std::vector<int64_t>{2, 4});
  // documents 2, 4: 3 + 10 = 13 of 36 pairs.
  CHECK(documents["pairs"] == 13.0);
  CHECK(documents["density"].get<double>() == Approx(13.0 / 36));
  CHECK(documents["dense_flops"] == 2.0 * 2 * 36 * 16);
}

TEST_CASE("a measurement with only 'causal' still reads, a disagreeing one does not",
          "[case][mask]") {
  auto j = nlohmann::json::parse(case_json(masked_case(MaskSpec::causal(), false, 0)).dump());
  j.erase("mask");
  j.erase("doc_lens");
  j.erase("alibi");
  j.erase("softcap");
  CHECK(shape_from_json(j).mask == MaskSpec::causal());
  j["mask"] = "window:2";
  CHECK_THROWS_WITH(shape_from_json(j), Catch::Contains("disagrees"));
  j["causal"] = false;
  CHECK(shape_from_json(j).mask == MaskSpec::window(2));
  j["mask"] = "documents:2";
  CHECK_THROWS_WITH(shape_from_json(j), Catch::Contains("needs 'doc_lens'"));
  j["doc_lens"] = {2, 3};
  CHECK_THROWS_WITH(shape_from_json(j), Catch::Contains("sum to 5, not seq 6"));
}

TEST_CASE("records carry the mask, documents, modifiers, dense FLOPs and density",
          "[case][mask][results]") {
  CaseRecord record;
  record.sweep_case = masked_case(MaskSpec::documents({2, 4}), true, 30);
  record.work = count_work(record.sweep_case.shape);
  const auto j = to_json(record);
  CHECK(j["mask"] == "documents:2");
  CHECK(j["doc_lens"].get<std::vector<int64_t>>() == std::vector<int64_t>{2, 4});
  CHECK(j["alibi"] == true);
  CHECK(j["softcap"] == 30.0);
  CHECK(j["causal"] == false);
  CHECK(j["flops"] == 2.0 * 2 * 13 * 16);
  CHECK(j["dense_flops"] == 2.0 * 2 * 36 * 16);
  CHECK(j["density"].get<double>() == Approx(13.0 / 36));
  record.sweep_case = masked_case(MaskSpec::none(), false, 0);
  CHECK(to_json(record)["doc_lens"].is_null());
}

}  // namespace
}  // namespace attnbench
