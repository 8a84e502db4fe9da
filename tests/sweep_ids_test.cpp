// A sweep's cases are told apart by their ids (resume, merge and the end-of-run rewrite match on
// them): a config may not give an axis value twice, in any spelling, and every case id of an
// expanded sweep is distinct. Also the soft-cap limits of a config.
#include <catch2/catch.hpp>
#include <set>

#include "harness/plan/config.h"
#include "harness/plan/sweep.h"

namespace attnbench {
namespace {

const std::string header = "name = \"t\"\nvariants = [\"naive\"]\n[axes]\n";

std::string config_error(const std::string& axes) {
  try {
    expand_cases(parse_config(header + axes, "test.toml"), {"naive", "flash_cpu"});
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "no error";
}

TEST_CASE("a value repeated in any axis is a config error naming the axis and the value",
          "[config][sweep]") {
  const std::string seq = "seq_len = [16]\n";
  CHECK(config_error(seq + "mask = [\"window:4\", \"window:4\"]\n") ==
        "test.toml:5: axes.mask: 'window:4' is given twice (each value of an axis may appear "
        "once)");
  // Spellings of one value are one value.
  CHECK_THAT(config_error(seq + "mask = [\"window:4\", \"window:04\"]\n"),
             Catch::Contains("axes.mask: 'window:4' is given twice"));
  CHECK_THAT(config_error(seq + "softcap = [64, 64.0]\n"),
             Catch::Contains("test.toml:5: axes.softcap: 64 is given twice"));
  CHECK_THAT(config_error(seq + "softcap = [0, -0.0]\n"),
             Catch::Contains("axes.softcap: 0 is given twice"));
  CHECK_THAT(config_error(seq + "softcap = [1e1, 10]\n"),
             Catch::Contains("axes.softcap: 10 is given twice"));
  CHECK_THAT(config_error("seq_len = [16, 32, 16]\n"),
             Catch::Contains("test.toml:4: axes.seq_len: 16 is given twice"));
  CHECK_THAT(config_error("seq_q = [8]\nseq_kv = [8, 8]\n"),
             Catch::Contains("axes.seq_kv: 8 is given twice"));
  for (const char* axis : {"batch", "heads", "kv_heads", "d_k", "d_v"}) {
    CHECK_THAT(config_error(seq + axis + " = [1, 1]\n"),
               Catch::Contains(std::string("axes.") + axis + ": 1 is given twice"));
  }
  CHECK_THAT(config_error("seq_len = [16]\ntokens = [64, 64]\n"),
             Catch::Contains("axes.tokens: 64 is given twice"));
  CHECK_THAT(config_error(seq + "d_k = [8]\nmodel_dim = [16, 16]\n"),
             Catch::Contains("axes.model_dim: 16 is given twice"));
  CHECK_THAT(config_error(seq + "causal = [true, false, true]\n"),
             Catch::Contains("axes.causal: true is given twice"));
  CHECK_THAT(config_error(seq + "alibi = [false, false]\n"),
             Catch::Contains("axes.alibi: false is given twice"));
  CHECK_THAT(config_error(seq + "dtype = [\"bf16\", \"bf16\"]\n"),
             Catch::Contains("axes.dtype: bf16 is given twice"));
  CHECK_THAT(config_error(seq + "layout = [\"bshd\", \"bhsd\", \"bshd\"]\n"),
             Catch::Contains("axes.layout: bshd is given twice"));
  CHECK_THAT(config_error(seq + "mask = [\"documents:2\", \"documents:2\"]\n"),
             Catch::Contains("axes.mask: 'documents:2' is given twice"));
  // Distinct values, and range axes (strictly increasing), are fine.
  CHECK(config_error("seq_len = {from = 8, to = 64, mul = 2}\nsoftcap = [0, 30, 30.5]\n") ==
        "no error");
}

TEST_CASE("a soft-cap float32 cannot hold as a normal value is a config error", "[config]") {
  const std::string seq = "seq_len = [16]\n";
  for (const char* cap : {"1e300", "5e-324", "1e-40", "3e38"}) {
    CHECK_THAT(config_error(seq + "softcap = [" + cap + "]\n"),
               Catch::Contains("test.toml:5: axes.softcap: must be 0 (off) or between 1.2e-38 "
                               "and 1e+38 (a normal float32 value)"));
  }
  CHECK(config_error(seq + "softcap = [1.2e-38, 1e38]\n") == "no error");
}

TEST_CASE("every case id of an expanded sweep is distinct", "[sweep]") {
  // Every axis with more than one value, the modifiers and both lockstep forms.
  const std::string text = header + R"(seq_q = [16, 32]
seq_kv = [32, 48]
heads = [2, 4]
kv_heads = [1, 2]
d_k = [8, 16]
d_v = [8, 24]
batch = [1, 2]
mask = ["none", "causal", "window:4", "window:8", "prefix:4", "prefix:8"]
alibi = [false, true]
softcap = [0, 1, 1.5, 30]
dtype = ["fp32", "bf16"]
layout = ["bhsd", "bshd"]
)";
  const auto cases = expand_cases(parse_config(text, "test.toml"), {"naive", "flash_cpu"});
  REQUIRE(cases.size() == 2 * 2 * 2 * 2 * 2 * 2 * 2 * 2 * 6 * 2 * 4 * 2 * 2);
  std::set<std::string> ids;
  for (const Case& c : cases) ids.insert(c.id);
  CHECK(ids.size() == cases.size());

  const std::string lockstep = header + R"(seq_len = [16, 32, 64]
tokens = [64, 128]
model_dim = [32, 64]
d_k = [8, 16]
mask = ["documents:1", "documents:3", "causal"]
)";
  const auto lockstep_cases = expand_cases(parse_config(lockstep, "test.toml"), {"naive"});
  std::set<std::string> lockstep_ids;
  for (const Case& c : lockstep_cases) lockstep_ids.insert(c.id);
  CHECK(lockstep_ids.size() == lockstep_cases.size());
}

}  // namespace
}  // namespace attnbench
