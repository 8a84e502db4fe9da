// The axes table is the one place an axis is declared: its defaults read through its own reader,
// its order is the sweep's, attend's flags read their values as the config reads the key, the
// peer's skips follow its peer column, and the shape's fields reach records and plans from one
// table (with older records given a new field's default on read).
#include "harness/plan/axes_table.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "harness/core/case_json.h"
#include "harness/core/record.h"
#include "harness/core/shape_fields.h"
#include "harness/plan/axis_flags.h"
#include "harness/plan/config.h"
#include "harness/plan/config_keys.h"
#include "harness/plan/config_reference.h"
#include "harness/plan/sweep.h"
#include "harness/results/record_upgrade.h"

namespace attnbench {
namespace {

const std::string header = "name = \"t\"\nvariants = [\"naive\"]\n[axes]\nseq_len = [16]\n";

TEST_CASE("every axis of the table is a config key, in the reference, with a default it reads",
          "[config][axes]") {
  const std::vector<std::string> keys = config_key_names("axes");
  const std::string reference = config_reference_markdown();
  const ConfigReader reader("test");
  std::set<std::string> names;
  for (const AxisDefinition& axis : axis_definitions()) {
    INFO(axis.key.name);
    CHECK(names.insert(axis.key.name).second);
    CHECK(std::find(keys.begin(), keys.end(), axis.key.name) != keys.end());
    CHECK(reference.find(std::string("`axes.") + axis.key.name + "`") != std::string::npos);
    // A default is TOML its own reader accepts, and a config that leaves the key out holds it.
    if (axis.key.default_toml != nullptr) {
      const AxisValues defaults = default_values(axis, reader);
      CHECK(!defaults.empty());
      CHECK(parse_config(header, "t").axes.values(stored_name(axis)) == defaults);
    } else {
      CHECK(default_values(axis, reader).empty());
    }
    if (axis.attend_flag != nullptr) {
      CHECK(reference.find(std::string("`attend ") + axis.attend_flag + "`") != std::string::npos);
    }
  }
}

TEST_CASE("the product walks the axes in the table's order, the last fastest", "[config][axes]") {
  const SweepConfig config = parse_config(
      header + "d_k = [8, 16]\ndtype = [\"fp32\", \"bf16\"]\npass = [\"fwd\", \"bwd\"]\n", "t");
  const std::vector<Case> cases = expand_cases(config, {"naive"});
  REQUIRE(cases.size() == 8);
  // d_k before dtype before pass in the table: pass changes every case, d_k every fourth.
  CHECK(cases[0].shape.pass == Pass::fwd);
  CHECK(cases[1].shape.pass == Pass::bwd);
  CHECK(cases[1].shape.dtype == DType::fp32);
  CHECK(cases[2].shape.dtype == DType::bf16);
  CHECK(cases[3].shape.d_k == 8);
  CHECK(cases[4].shape.d_k == 16);
}

TEST_CASE("attend's axis flags read their values as the config reads the key", "[cli][axes]") {
  Shape plain;
  plain.heads = plain.kv_heads = 2;
  plain.seq_q = plain.seq_kv = 16;
  plain.d_k = plain.d_v = 8;
  const Shape set = with_axis_flags(plain, {{"--softcap", "30"},
                                            {"--alibi", "true"},
                                            {"--layout", "bshd"},
                                            {"--kv-cache", "paged:4"},
                                            {"--kv-dtype", "int8"}});
  CHECK(set.softcap == 30);
  CHECK(set.alibi);
  CHECK(set.layout == Layout::bshd);
  CHECK(set.kv_cache.page_size == 4);
  CHECK(set.kv_dtype == KvDType::int8);
  CHECK(with_axis_flags(plain, {}).softcap == 0);
  // The same checks and messages as the config's, named by the flag (and a number's value).
  CHECK_THROWS_WITH(with_axis_flags(plain, {{"--softcap", "1e300"}}),
                    Catch::Contains("--softcap 1e+300: must be 0 (off) or between") &&
                        Catch::Contains("a normal float32 value"));
  CHECK_THROWS_WITH(with_axis_flags(plain, {{"--softcap", "thirty"}}),
                    Catch::Contains("--softcap thirty: expected a number"));
  CHECK_THROWS_WITH(with_axis_flags(plain, {{"--softcap", "[1, 2]"}}),
                    Catch::Contains("takes one value"));
  CHECK_THROWS_WITH(with_axis_flags(plain, {{"--layout", "hbsd"}}),
                    Catch::StartsWith("--layout: unknown value 'hbsd'"));
  CHECK_THROWS_WITH(with_axis_flags(plain, {{"--kv-cache", "paged:0"}}),
                    Catch::StartsWith("--kv-cache: "));
}

TEST_CASE("the peer's skips follow the table's peer column", "[config][axes]") {
  Shape s;
  s.seq_q = s.seq_kv = 16;
  s.d_k = s.d_v = 8;
  CHECK(peer_skip_reason(s).empty());
  s.set_mask(MaskSpec::window(4));  // the peer times every mask
  CHECK(peer_skip_reason(s).empty());
  s.alibi = true;
  CHECK_THAT(peer_skip_reason(s), Catch::StartsWith("alibi: "));
  s.alibi = false;
  s.kv_dtype = KvDType::fp8_e4m3;
  CHECK_THAT(peer_skip_reason(s), Catch::StartsWith("kv_dtype: "));
}

TEST_CASE("the shape's fields reach records and plans from one table", "[results][axes]") {
  Case c;
  c.variant = "naive";
  c.shape.seq_q = c.shape.seq_kv = 16;
  c.shape.d_k = c.shape.d_v = 8;
  c.id = case_id(c.variant, c.shape);
  const nlohmann::ordered_json plan_entry = case_json(c);
  const std::vector<std::string>& fields = record_fields();
  for (const ShapeField& field : shape_fields()) {
    INFO(field.name);
    CHECK(plan_entry.contains(field.name));
    CHECK(std::find(fields.begin(), fields.end(), field.name) != fields.end());
  }
  // A record written before a shape field existed is given the value its shape reads as.
  nlohmann::ordered_json record = plan_entry;
  record.erase("alibi");
  record.erase("softcap");
  const nlohmann::ordered_json upgraded = upgrade_record(record);
  CHECK(upgraded["alibi"] == false);
  CHECK(upgraded["softcap"] == 0);
}

}  // namespace
}  // namespace attnbench
