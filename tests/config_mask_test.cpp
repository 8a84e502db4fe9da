// The mask and score-modifier axes of a config: the specs they take, the causal alias, the errors
// naming key and line, and how the sweep expands them (documents drawn once per run, ids).
#include <catch2/catch.hpp>

#include "harness/plan/config.h"
#include "harness/plan/sweep.h"

namespace attnbench {
namespace {

const std::string header = "name = \"t\"\nvariants = [\"naive\"]\n[axes]\nseq_len = [64]\n";

std::string config_error(const std::string& text) {
  try {
    expand_cases(parse_config(text, "test.toml"), {"naive"});
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "no error";
}

TEST_CASE("the mask axis takes every kind, causal = true is mask = \"causal\"", "[config][mask]") {
  const SweepConfig config =
      parse_config(header + R"(mask = ["none", "causal", "window:819", "prefix:64", "documents:16"]
alibi = [false, true]
softcap = [0, 30]
)",
                   "test.toml");
  CHECK(config.axes.values("mask").size() == 5);
  CHECK(config.axes.values_of<MaskSpec>("mask")[2] == MaskSpec::window(819));
  CHECK(config.axes.values_of<MaskSpec>("mask")[3] == MaskSpec::prefix(64));
  CHECK(config.axes.values_of<MaskSpec>("mask")[4].kind == MaskKind::documents);
  CHECK(config.axes.values_of<MaskSpec>("mask")[4].length == 16);
  CHECK(config.axes.values_of<bool>("alibi") == std::vector<bool>{false, true});
  CHECK(config.axes.values_of<double>("softcap") == std::vector<double>{0, 30});

  CHECK(parse_config(header + "causal = true\n", "t").axes.values_of<MaskSpec>("mask") ==
        std::vector<MaskSpec>{MaskSpec::causal()});
  CHECK(parse_config(header + "causal = [false, true]\n", "t").axes.values_of<MaskSpec>("mask") ==
        std::vector<MaskSpec>{MaskSpec::none(), MaskSpec::causal()});
  CHECK(parse_config(header + "mask = \"window:8\"\n", "t").axes.values_of<MaskSpec>("mask") ==
        std::vector<MaskSpec>{MaskSpec::window(8)});
  CHECK(parse_config(header, "t").axes.values_of<MaskSpec>("mask") ==
        std::vector<MaskSpec>{MaskSpec::none()});
}

TEST_CASE("bad masks and modifiers are errors naming the key and line", "[config][mask]") {
  CHECK_THAT(config_error(header + "mask = [\"none\", \"sliding:8\"]\n"),
             Catch::Contains("test.toml:5: axes.mask: unknown mask 'sliding:8'"));
  CHECK_THAT(config_error(header + "mask = [\"window\"]\n"),
             Catch::Contains("test.toml:5: axes.mask: 'window' needs a length"));
  CHECK_THAT(config_error(header + "mask = \"window:-4\"\n"),
             Catch::Contains("test.toml:5: axes.mask:") && Catch::Contains("0 or more"));
  CHECK_THAT(config_error(header + "mask = [\"documents:0\"]\n"),
             Catch::Contains("axes.mask: 'documents:0': needs at least 1 document"));
  CHECK_THAT(config_error(header + "mask = [true]\n"),
             Catch::Contains("test.toml:5: axes.mask: expected a mask"));
  CHECK_THAT(config_error(header + "mask = []\n"), Catch::Contains("axes.mask: axis is empty"));
  CHECK_THAT(config_error(header + "mask = [\"causal\"]\ncausal = [true]\n"),
             Catch::Contains("test.toml:6: axes.causal: give either causal or mask, not both"));
  CHECK_THAT(config_error(header + "alibi = [1]\n"),
             Catch::Contains("test.toml:5: axes.alibi: expected true or false"));
  CHECK_THAT(config_error(header + "softcap = [30, -1]\n"),
             Catch::Contains("test.toml:5: axes.softcap: must be 0 (off) or between") &&
                 Catch::Contains("got -1"));
  CHECK_THAT(config_error(header + "softcap = \"30\"\n"),
             Catch::Contains("axes.softcap: expected a number"));
  // Masks the shapes cannot hold: a config error naming the shape.
  CHECK_THAT(config_error(header + "mask = [\"prefix:65\"]\n"),
             Catch::Contains("prefix length must be in [0, seq_kv = 64]"));
  CHECK_THAT(config_error(header + "mask = [\"documents:65\"]\n"),
             Catch::Contains("needs 1 to seq (64) documents"));
  CHECK_THAT(config_error("name = \"t\"\nvariants = [\"naive\"]\n[axes]\nseq_q = [16]\nseq_kv = "
                          "[32]\nmask = [\"documents:2\"]\n"),
             Catch::Contains("need seq_q == seq_kv"));
}

TEST_CASE("the sweep crosses masks and modifiers, ids keep none and causal as before",
          "[sweep][mask]") {
  const SweepConfig config = parse_config(
      header +
          "mask = [\"none\", \"causal\", \"window:8\"]\nalibi = [false, true]\nsoftcap = [0, "
          "30]\n",
      "test.toml");
  const auto cases = expand_cases(config, {"naive"});
  REQUIRE(cases.size() == 3 * 2 * 2);
  CHECK(cases[0].id == "naive|b1|h1|kv1|q64|k64|dk64|dv64|full|fp32|bhsd");
  CHECK(cases[4].id == "naive|b1|h1|kv1|q64|k64|dk64|dv64|causal|fp32|bhsd");
  CHECK(cases[4].shape.causal);
  CHECK(cases[11].id ==
        "naive|b1|h1|kv1|q64|k64|dk64|dv64|full|fp32|bhsd|window:8|alibi|softcap:30");
  CHECK_FALSE(cases[11].shape.causal);
}

TEST_CASE("documents are drawn from the run's seed, the same for every variant and dtype",
          "[sweep][mask]") {
  const std::string text =
      "name = \"t\"\nvariants = [\"naive\"]\n[axes]\nseq_len = [64, 128]\n"
      "dtype = [\"fp32\", \"bf16\"]\nmask = [\"documents:5\"]\n";
  const auto cases = expand_cases(parse_config(text, "t"), {"naive", "flash_cpu"});
  REQUIRE(cases.size() == 2 * 2 * 2);
  for (const Case& c : cases) {
    INFO(c.id);
    CHECK(c.shape.mask.doc_lens.size() == 5);
    CHECK(validate(c.shape).empty());
    for (const Case& other : cases)
      if (other.shape.seq_q == c.shape.seq_q) CHECK(other.shape.mask == c.shape.mask);
  }
  CHECK(expand_cases(parse_config(text, "t"), {"naive"})[0].shape.mask == cases[0].shape.mask);
  const auto reseeded = expand_cases(parse_config(text + "[measure]\nseed = 7\n", "t"), {"naive"});
  CHECK(reseeded[0].shape.mask != cases[0].shape.mask);
}

}  // namespace
}  // namespace attnbench
