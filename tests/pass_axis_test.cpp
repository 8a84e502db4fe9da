// The pass axis: parsed from configs (default fwd), expanded into cases whose ids and
// descriptions change only past the forward, carried through case JSON (missing reads as fwd),
// and counted at 2.5x (bwd) and 3.5x (fwd_bwd) the forward's FLOPs.
#include <catch2/catch.hpp>
#include <string>

#include "harness/core/case.h"
#include "harness/core/case_json.h"
#include "harness/core/work_count.h"
#include "harness/plan/config.h"
#include "harness/plan/sweep.h"

namespace attnbench {
namespace {

const std::string with_passes = R"(
name = "t"
variants = ["naive"]
[axes]
seq_len = [64]
pass = ["fwd", "bwd", "fwd_bwd"]
)";

TEST_CASE("the pass axis defaults to fwd and expands next to each shape", "[config][pass]") {
  const SweepConfig plain = parse_config(
      "name = \"t\"\nvariants = [\"naive\"]\n[axes]\n"
      "seq_len = [64]\n",
      "test.toml");
  CHECK(plain.axes.values_of<Pass>("pass") == std::vector<Pass>{Pass::fwd});
  const std::vector<Case> cases = expand_cases(parse_config(with_passes, "test.toml"), {"naive"});
  REQUIRE(cases.size() == 3);
  CHECK(cases[0].shape.pass == Pass::fwd);
  CHECK(cases[1].shape.pass == Pass::bwd);
  CHECK(cases[2].shape.pass == Pass::fwd_bwd);
  // The forward's id is the id it had before the axis; the others append their pass.
  CHECK(cases[0].id == "naive|b1|h1|kv1|q64|k64|dk64|dv64|full|fp32|bhsd");
  CHECK(cases[1].id == cases[0].id + "|bwd");
  CHECK(describe(cases[2].shape) == describe(cases[0].shape) + " fwd_bwd");
}

TEST_CASE("an unknown pass is a one-line error naming the key", "[config][pass]") {
  std::string error;
  try {
    parse_config(
        "name = \"t\"\nvariants = [\"naive\"]\n[axes]\nseq_len = [64]\npass = [\"back\"]\n",
        "test.toml");
  } catch (const ConfigError& failure) {
    error = failure.what();
  }
  CHECK(error.find("axes.pass") != std::string::npos);
  CHECK(error.find("unknown value 'back'") != std::string::npos);
  CHECK(error.find('\n') == std::string::npos);
}

TEST_CASE("case JSON carries the pass, and reads records without it as fwd", "[pass]") {
  Case c;
  c.variant = "naive";
  c.shape.seq_q = c.shape.seq_kv = 8;
  c.shape.pass = Pass::fwd_bwd;
  nlohmann::json json = case_json(c);
  CHECK(json["pass"] == "fwd_bwd");
  CHECK(shape_from_json(json).pass == Pass::fwd_bwd);
  json.erase("pass");
  CHECK(shape_from_json(json).pass == Pass::fwd);
}

TEST_CASE("backward FLOPs are 2.5x the forward's, fwd_bwd 3.5x, over unmasked pairs",
          "[work][pass]") {
  Shape s;
  s.heads = 8, s.seq_q = s.seq_kv = 100, s.d_k = 64, s.d_v = 32;
  s.set_mask(MaskSpec::causal());
  const WorkCount forward = count_work(s);
  s.pass = Pass::bwd;
  const WorkCount backward = count_work(s);
  s.pass = Pass::fwd_bwd;
  const WorkCount both = count_work(s);
  CHECK(backward.flops == Approx(2.5 * forward.flops));
  CHECK(both.flops == Approx(3.5 * forward.flops));
  CHECK(backward.pairs == forward.pairs);
  CHECK(backward.flop_convention == forward.flop_convention + "; bwd: 2.5x forward");
  CHECK(both.min_bytes > backward.min_bytes);
  CHECK(backward.min_bytes > forward.min_bytes);
}

}  // namespace
}  // namespace attnbench
