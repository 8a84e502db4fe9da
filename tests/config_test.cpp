// Config parsing: the schema, and a one-line error naming the key (and line) for each mistake.
#include "harness/plan/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>

#include "harness/plan/sweep.h"

namespace attnbench {
namespace {

const std::string minimal = R"(
name = "t"
variants = ["naive"]
[axes]
seq_len = [64, 128]
)";

std::string config_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    parse_config(text, "test.toml", overrides);
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "no error";
}

TEST_CASE("a minimal config gets the documented defaults", "[config]") {
  const SweepConfig config = parse_config(minimal, "test.toml");
  CHECK(config.name == "t");
  CHECK(config.variants == std::vector<std::string>{"naive"});
  CHECK(config.axes.values_of<int64_t>("batch") == Axis{1});
  CHECK(config.axes.values_of<int64_t>("d_k") == Axis{64});
  CHECK(config.axes.values_of<int64_t>("seq_len") == Axis{64, 128});
  CHECK(config.timing.repetitions == 3);
  CHECK(config.oracle.full_check_max_n == 512);
}

TEST_CASE("ranges expand geometrically or arithmetically", "[config]") {
  const SweepConfig config = parse_config(R"(
name = "t"
variants = "cpu"
[axes]
seq_len = { from = 128, to = 1024, mul = 2 }
d_k = { from = 32, to = 96, step = 32 }
causal = [false, true]
)",
                                          "test.toml");
  CHECK(config.axes.values_of<int64_t>("seq_len") == Axis{128, 256, 512, 1024});
  CHECK(config.axes.values_of<int64_t>("d_k") == Axis{32, 64, 96});
  CHECK(config.axes.values_of<MaskSpec>("mask") ==
        std::vector<MaskSpec>{MaskSpec::none(), MaskSpec::causal()});
}

TEST_CASE("every config mistake is an error naming the key and line", "[config]") {
  CHECK_THAT(config_error("name = \"t\"\nvariants = [\"naive\"\n"),
             Catch::StartsWith("test.toml:") && Catch::Contains("syntax"));
  CHECK_THAT(config_error(minimal + "[measure]\nrepetitons = 3\n"),
             Catch::Contains("test.toml:7: measure.repetitons: unknown key"));
  CHECK_THAT(config_error(minimal + "colour = 1\n"), Catch::Contains("colour: unknown key"));
  CHECK_THAT(
      config_error(minimal + "[measure]\nrepetitions = \"three\"\n"),
      Catch::Contains("measure.repetitions: must be an integer in [1, 100000], got \"three\""));
  CHECK_THAT(config_error("name = \"" + std::string(201, 'a') + "\"\nvariants = [\"naive\"]\n"),
             Catch::Contains("name: is 201 bytes long; at most 200"));
  // A TOML date has no JSON form: it was quoted as "got null".
  CHECK_THAT(config_error(minimal + "[measure]\nrepetitions = 1979-05-27\n"),
             Catch::Contains("got a TOML date"));
  CHECK_THAT(config_error(minimal + "[measure]\nrepetitions = 07:32:00\n"),
             Catch::Contains("got a TOML time"));
  CHECK_THAT(config_error("name = \"t\"\nvariants = [\"naive\"]\n[axes]\nseq_len = []\n"),
             Catch::Contains("test.toml:4: axes.seq_len: axis is empty"));
  CHECK_THAT(config_error("name = \"t\"\nvariants = [\"naive\"]\n[axes]\nseq_len = [64, 0]\n"),
             Catch::Contains("axes.seq_len: must be positive, got 0"));
  CHECK_THAT(config_error("name = \"t\"\nvariants = [\"naive\"]\n[axes]\nseq_len = [-8]\n"),
             Catch::Contains("must be positive, got -8"));
  CHECK_THAT(config_error("name = \"t\"\nvariants = [\"naive\"]\n[axes]\nd_k = [64]\n"),
             Catch::Contains("needs seq_len"));
  CHECK_THAT(config_error("name = \"t\"\nvariants = []\n[axes]\nseq_len = [64]\n"),
             Catch::Contains("variants: is empty"));
  CHECK_THAT(config_error("variants = [\"naive\"]\n[axes]\nseq_len = [64]\n"),
             Catch::Contains("name: missing"));
  CHECK_THAT(config_error(minimal + "[measure]\nmin_time_s = -1\n"),
             Catch::Contains("measure.min_time_s: must be a number in (0, 86400], got -1"));
  CHECK_THAT(config_error(minimal + "[measure]\ndistribution = \"uniform\"\n"),
             Catch::Contains("measure.distribution: must be one of normal, large_scores, "
                             "near_constant, dominant_key, got \"uniform\""));
  CHECK_THAT(config_error("name = \"t\"\nvariants = [\"naive\"]\n[axes]\nseq_len = { from = 64, to "
                          "= 32, mul = 2 }\n"),
             Catch::Contains("'to' (32) is below 'from' (64)"));
  CHECK_THAT(config_error("name = \"t\"\nvariants = [\"naive\"]\n[axes]\nseq_len = [64]\nbatch = "
                          "2\ntokens = [128]\n"),
             Catch::Contains("axes.tokens"));
}

TEST_CASE("overrides from --set take a TOML value and are validated like the file", "[config]") {
  const SweepConfig config =
      parse_config(minimal, "test.toml", {"measure.repetitions=7", "axes.seq_len=[32]"});
  CHECK(config.timing.repetitions == 7);
  CHECK(config.axes.values_of<int64_t>("seq_len") == Axis{32});
  CHECK_THAT(config_error(minimal, {"measure.repetitions=[1"}), Catch::Contains("not valid TOML"));
  // A bare word is the string it spells (the shell ate its quotes); a bad one still names the key.
  CHECK(parse_config(minimal, "test.toml", {"measure.peaks=skip"}).measure.peaks == "skip");
  CHECK(parse_config(minimal, "test.toml", {"measure.peaks=\"skip\""}).measure.peaks == "skip");
  CHECK_THAT(config_error(minimal, {"measure.peaks=maybe"}),
             Catch::Contains("measure.peaks") && Catch::Contains("one of measure, skip"));
  CHECK_THAT(config_error(minimal, {"measure.repetitions=seven"}),
             Catch::Contains("measure.repetitions"));
  CHECK_THAT(config_error(minimal, {"measure.nonsense=1"}),
             Catch::Contains("measure.nonsense: unknown key"));
  CHECK_THAT(config_error(minimal, {"no-equals-sign"}), Catch::Contains("expected key=value"));
  // Spaces around '=' as TOML writes them; a key of spaces alone is still no key.
  CHECK(parse_config(minimal, "test.toml", {"axes.seq_len = [48]"})
            .axes.values_of<int64_t>("seq_len") == Axis{48});
  CHECK(parse_config(minimal, "test.toml", {" measure.peaks =\tskip "}).measure.peaks == "skip");
  CHECK_THAT(config_error(minimal, {"  =1"}), Catch::Contains("expected key=value"));
}

TEST_CASE("the stopping rule, interleaving and peak checks are read and validated", "[config]") {
  const SweepConfig defaults = parse_config(minimal, "test.toml");
  CHECK(defaults.timing.target_rel_ci == 0);  // no target: exactly `repetitions`
  CHECK(defaults.timing.max_time_s == 10);
  CHECK_FALSE(defaults.measure.interleave);
  CHECK(defaults.measure.peak_check_interval_s == 60);

  const SweepConfig set =
      parse_config(minimal +
                       "[measure]\ntarget_rel_ci = 0.02\nmax_time_s = 5\ninterleave = true\n"
                       "peak_check_interval_s = 0\n",
                   "test.toml");
  CHECK(set.timing.target_rel_ci == 0.02);
  CHECK(set.timing.max_time_s == 5);
  CHECK(set.measure.interleave);
  CHECK(set.measure.peak_check_interval_s == 0);

  CHECK_THAT(
      config_error(minimal + "[measure]\ntarget_rel_ci = 2\n"),
      Catch::Contains("test.toml:7: measure.target_rel_ci: must be a number in [0, 1), got 2"));
  CHECK_THAT(config_error(minimal + "[measure]\ntarget_rel_ci = -0.1\n"),
             Catch::Contains("measure.target_rel_ci: must be a number in [0, 1), got -0.1"));
  CHECK_THAT(config_error(minimal + "[measure]\nmax_time_s = 0\n"),
             Catch::Contains("measure.max_time_s: must be a number > 0, got 0"));
  CHECK_THAT(config_error(minimal + "[measure]\ninterleave = 1\n"),
             Catch::Contains("measure.interleave: must be true or false, got 1"));
}

TEST_CASE("oracle.sample_rows: random rows on top of each head's first and last, bounded",
          "[config]") {
  CHECK(parse_config(minimal + "[oracle]\nsample_rows = 1\n", "test.toml").oracle.sample_rows == 1);
  CHECK_THAT(config_error(minimal + "[oracle]\nsample_rows = 0\n"),
             Catch::Contains("oracle.sample_rows: must be an integer in [1, 1000000], got 0"));
  CHECK_THAT(
      config_error(minimal + "[oracle]\nsample_rows = 1000001\n"),
      Catch::Contains(
          "test.toml:7: oracle.sample_rows: must be an integer in [1, 1000000], got 1000001"));
}

TEST_CASE("a missing config file is a one-line error", "[config]") {
  CHECK_THROWS_WITH(load_config("/nonexistent/config.toml"),
                    Catch::Contains("cannot open config file"));
}

TEST_CASE("sweep expansion: cartesian product, seq innermost, stable ids", "[sweep]") {
  const SweepConfig config = parse_config(R"(
name = "t"
variants = ["naive", "naive"]
[axes]
heads = [2, 4]
kv_heads = [2]
seq_len = [16, 32, 64]
causal = [false, true]
)",
                                          "test.toml");
  const auto variants = resolve_variants(config.variants);
  CHECK(variants == std::vector<std::string>{"naive"});  // duplicates dropped
  const auto cases = expand_cases(config, variants);
  REQUIRE(cases.size() == 2 * 2 * 3);
  CHECK(cases[0].shape.seq_q == 16);
  CHECK(cases[1].shape.seq_q == 32);
  CHECK(cases[3].shape.causal);
  CHECK(cases[6].shape.heads == 4);
  CHECK(cases[6].shape.kv_heads == 2);
  CHECK(cases[5].id == "naive|b1|h2|kv2|q64|k64|dk64|dv64|causal|fp32|bhsd");
  for (std::size_t i = 0; i < cases.size(); ++i) CHECK(cases[i].index == static_cast<int64_t>(i));
}

TEST_CASE("lockstep constraints: batch = tokens / seq, heads = model_dim / d_k", "[sweep]") {
  const SweepConfig config = parse_config(R"(
name = "fa"
variants = ["naive"]
[axes]
tokens = [16384]
model_dim = [2048]
seq_len = [512, 16384]
d_k = [64, 128]
)",
                                          "test.toml");
  const auto cases = expand_cases(config, {"naive"});
  REQUIRE(cases.size() == 4);
  CHECK(cases[0].shape.batch == 32);
  CHECK(cases[0].shape.heads == 32);
  CHECK(cases[1].shape.batch == 1);
  CHECK(cases[3].shape.heads == 16);
  CHECK(cases[3].shape.kv_heads == 16);
}

TEST_CASE("impossible shapes and unknown variants are errors", "[sweep]") {
  const auto expand = [](const std::string& axes) {
    return expand_cases(
        parse_config("name = \"t\"\nvariants = [\"naive\"]\n[axes]\n" + axes, "t.toml"), {"naive"});
  };
  CHECK_THROWS_WITH(expand("heads = [6]\nkv_heads = [4]\nseq_len = [8]\n"),
                    Catch::Contains("heads (6) must be a multiple of kv_heads (4)"));
  CHECK_THROWS_WITH(expand("tokens = [1000]\nseq_len = [512]\n"),
                    Catch::Contains("1000 is not a multiple of seq_len 512"));
  CHECK_THROWS_WITH(expand("seq_q = [64]\nseq_kv = [32]\ncausal = [true]\n"),
                    Catch::Contains("query rows 0 to 31 see no key under the causal mask"));
  CHECK_THROWS_WITH(expand("seq_len = [100000000]\nheads = [1000]\nbatch = [1000]\n"),
                    Catch::Contains("too large"));
  CHECK_THROWS_WITH(resolve_variants({"naive", "fastest"}),
                    Catch::Contains("unknown variant 'fastest'"));
}

TEST_CASE("shards partition the cases, --shard is validated", "[sweep]") {
  const SweepConfig config = parse_config(minimal, "t.toml", {"axes.seq_len=[8, 16, 32, 64, 128]"});
  const auto cases = expand_cases(config, {"naive"});
  std::vector<int64_t> seen;
  for (int64_t i = 0; i < 3; ++i) {
    for (const Case& c : select_shard(cases, parse_shard(fmt::format("{}/3", i))))
      seen.push_back(c.index);
  }
  std::sort(seen.begin(), seen.end());
  CHECK(seen == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK_THROWS_AS(parse_shard("3/3"), ConfigError);
  CHECK_THROWS_AS(parse_shard("1/0"), ConfigError);
  CHECK_THROWS_AS(parse_shard("a/b"), ConfigError);
  CHECK_THROWS_AS(parse_shard("1/2x"), ConfigError);
}

}  // namespace
}  // namespace attnbench
