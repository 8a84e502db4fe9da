// Serving attention: ragged batches (kv_lens) and paged KV caches (kv_cache paged:P), from the
// config through the inputs, the oracle and the sweep runner to the records, and the bad input
// each refuses with one line. Small shapes: the whole file runs in well under a second.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <numeric>
#include <set>

#include "harness/core/case.h"
#include "harness/core/distribution.h"
#include "harness/core/record.h"
#include "harness/core/work_count.h"
#include "harness/measure/inputs.h"
#include "harness/measure/oracle.h"
#include "harness/measure/paged_cache.h"
#include "harness/plan/config.h"
#include "harness/plan/sweep.h"
#include "harness/runner/case_budget.h"
#include "harness/runner/sweep_runner.h"
#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

std::string config_error(const std::string& axes) {
  try {
    // Parsed, then expanded: the sweep validates every shape it makes (sweep.cpp).
    const SweepConfig config =
        parse_config("name = \"t\"\nvariants = [\"naive\"]\n[axes]\n" + axes, "test.toml");
    expand_cases(config, {"naive"});
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "no error";
}

SweepConfig serving_config(const std::string& axes) {
  return parse_config("name = \"t\"\nvariants = [\"naive\"]\n[axes]\n" + axes, "test.toml");
}

Shape paged_ragged_shape() {
  return testing::serving(testing::make_shape(1, 4, 2, 2, 1, 16, 16, true), {7, 40, 2, 17}, 8);
}

TEST_CASE("kv_lens sets batch and seq_kv, kv_cache multiplies the cases", "[serving][config]") {
  const SweepConfig config = serving_config(
      "seq_q = [1, 2]\nkv_lens = [\"5,300,2\", \"64\"]\n"
      "kv_cache = [\"contiguous\", \"paged:16\"]\nheads = 4\nkv_heads = 2\n");
  const std::vector<Case> cases = expand_cases(config, {"naive"});
  REQUIRE(cases.size() == 8);
  std::set<std::string> ids;
  for (const Case& c : cases) {
    ids.insert(c.id);
    if (c.shape.kv_lens.size() == 3) {
      CHECK(c.shape.batch == 3);
      CHECK(c.shape.seq_kv == 300);
      CHECK(c.id.find("|kv_lens:5,300,2") != std::string::npos);
    } else {
      CHECK(c.shape.batch == 1);
      CHECK(c.shape.seq_kv == 64);
    }
    CHECK((c.id.find("|paged:16") != std::string::npos) == c.shape.kv_cache.is_paged());
  }
  CHECK(ids.size() == cases.size());
}

TEST_CASE("case ids and descriptions of shapes without serving fields are unchanged",
          "[serving][config]") {
  const Shape plain = testing::make_shape(2, 4, 2, 8, 16, 32, 32, true);
  CHECK(case_id("naive", plain) == "naive|b2|h4|kv2|q8|k16|dk32|dv32|causal|fp32|bhsd");
  CHECK(describe(plain) == "b2 h4/2 q8 kv16 dk32 dv32 causal");
  CHECK(describe(paged_ragged_shape()).find("kv_lens:7,40,2,17 paged:8") != std::string::npos);
}

TEST_CASE("bad serving input in a config is one line naming the problem", "[serving][config]") {
  const std::string seq = "seq_q = 1\n";
  CHECK_THAT(config_error(seq + "kv_lens = \"1024,0,5\""),
             Catch::Contains("each cache length must be a whole number, 1 or more (got '0')"));
  CHECK_THAT(config_error(seq + "kv_lens = \"1024,-5\""), Catch::Contains("got '-5'"));
  CHECK_THAT(config_error(seq + "kv_lens = \"12,,4\""), Catch::Contains("got ''"));
  CHECK_THAT(config_error(seq + "kv_lens = \"99999999\""),
             Catch::Contains("holds 99999999 keys, outside 1..16777216"));
  CHECK_THAT(config_error(seq + "kv_lens = \"4,8\"\nbatch = 3"),
             Catch::Contains("3 conflicts with kv_lens '4,8', which holds 2 sequences"));
  CHECK(config_error(seq + "kv_lens = \"4,8\"\nbatch = 2") == "no error");
  CHECK_THAT(config_error(seq + "kv_lens = \"4,8\"\nseq_kv = 8"),
             Catch::Contains("do not also give seq_kv"));
  CHECK_THAT(config_error(seq + "seq_kv = 8\nkv_cache = \"paged:0\""),
             Catch::Contains("the page size P must be a whole number of tokens, 1 or more"));
  CHECK_THAT(config_error(seq + "seq_kv = 8\nkv_cache = \"paged:-16\""),
             Catch::Contains("kv_cache 'paged:-16'"));
  CHECK_THAT(config_error(seq + "seq_kv = 8\nkv_cache = \"pages\""),
             Catch::Contains("unknown kv_cache 'pages' (expected contiguous or paged:P)"));
  CHECK_THAT(config_error("seq_q = 16\nmask = \"causal\"\nkv_lens = \"64,8\""),
             Catch::Contains("sequence 1 holds 8 keys, fewer than seq_q 16"));
  // Every mask aligns to each sequence's own end: a window or an empty prefix leaves a short
  // sequence's first rows without a key too (they reached the oracle, which crashed on them).
  CHECK_THAT(
      config_error("seq_q = 8\nmask = \"window:2\"\nkv_lens = \"16,3\""),
      Catch::Contains("sequence 1 holds 3 keys, fewer than seq_q 8: under the window:2 mask"));
  CHECK_THAT(
      config_error("seq_q = 8\nmask = \"prefix:0\"\nkv_lens = \"16,3\""),
      Catch::Contains("sequence 1 holds 3 keys, fewer than seq_q 8: under the prefix:0 mask"));
  CHECK(config_error("seq_q = 8\nmask = \"prefix:1\"\nkv_lens = \"16,3\"") == "no error");
  CHECK(config_error("seq_q = 2\nmask = \"window:2\"\nkv_lens = \"16,3\"") == "no error");
  // Packed documents cover seq_q = seq_kv tokens: drawn once the ragged batch has set seq_kv, and
  // refused where a sequence holds fewer.
  CHECK(config_error("seq_q = 16\nmask = \"documents:2\"\nkv_lens = \"16,16\"") == "no error");
  CHECK_THAT(config_error("seq_q = 16\nmask = \"documents:2\"\nkv_lens = \"16,12\""),
             Catch::Contains("sequence 1 holds 12 keys, not seq_q 16: packed documents need"));
  for (const std::string& axes :
       {seq + "kv_lens = \"0\"", seq + "seq_kv = 8\nkv_cache = \"paged:0\""}) {
    const std::string error = config_error(axes);
    CHECK(error.find('\n') == std::string::npos);
  }
}

TEST_CASE("validate refuses serving shapes a config could not spell", "[serving]") {
  Shape s = paged_ragged_shape();
  CHECK(validate(s).empty());
  s.kv_cache.page_size = 0;
  CHECK_THAT(validate(s), Catch::Contains("page size must be in 1..16777216"));
  s = paged_ragged_shape();
  s.seq_kv = 41;
  CHECK_THAT(validate(s), Catch::Contains("the longest sequence holds 40 keys, not seq_kv 41"));
  s = paged_ragged_shape();
  s.batch = 3;
  CHECK_THAT(validate(s), Catch::Contains("kv_lens gives 4 sequence lengths for batch 3"));
}

TEST_CASE("a paged cache holds every key once, in shuffled pages, -1 past each last page",
          "[serving][inputs]") {
  const Shape paged = paged_ragged_shape();
  Shape contiguous = paged;
  contiguous.kv_cache = KvCacheSpec::contiguous();
  const HostTensors pages = make_inputs(paged, Distribution::normal, 7);
  const HostTensors flat = make_inputs(contiguous, Distribution::normal, 7);
  REQUIRE(paged.pool_pages() == 1 + 5 + 1 + 3);
  REQUIRE(pages.block_table.size() == static_cast<std::size_t>(4 * paged.pages_per_sequence()));
  std::vector<int32_t> used;
  for (int64_t b = 0; b < paged.batch; ++b)
    for (int64_t p = 0; p < paged.pages_per_sequence(); ++p) {
      const int32_t page = pages.block_table[static_cast<std::size_t>(b * 5 + p)];
      const bool holds_keys = p * 8 < paged.keys_of(b);
      CHECK((page >= 0) == holds_keys);
      if (page >= 0) used.push_back(page);
    }
  std::vector<int32_t> in_order(used.size());
  std::iota(in_order.begin(), in_order.end(), 0);
  CHECK(used != in_order);  // shuffled: 10! orders, one of them identity
  std::sort(used.begin(), used.end());
  CHECK(used == in_order);
  // Every key's K row, read through the table, is the contiguous tensor's; the padding is 0.
  for (int64_t b = 0; b < paged.batch; ++b)
    for (int64_t j = 0; j < paged.seq_kv; ++j) {
      const float flat_k = flat.k[static_cast<std::size_t>(((b * 2 + 1) * paged.seq_kv + j) * 16)];
      if (j >= paged.keys_of(b)) {
        CHECK(flat_k == 0.0f);
        continue;
      }
      const int32_t page = pages.block_table[static_cast<std::size_t>(b * 5 + j / 8)];
      CHECK(pages.k[static_cast<std::size_t>(((page * 2 + 1) * 8 + j % 8) * 16)] == flat_k);
    }
}

TEST_CASE("a paged cache read back through its table is the contiguous cache, padding 0",
          "[serving][inputs]") {
  // What `attnbench prepare` writes for the PyTorch peer, which has no block table.
  const Shape paged = paged_ragged_shape();
  Shape contiguous = paged;
  contiguous.kv_cache = KvCacheSpec::contiguous();
  HostTensors gathered = make_inputs(paged, Distribution::normal, 7);
  const HostTensors flat = make_inputs(contiguous, Distribution::normal, 7);
  gather_paged(gathered);
  CHECK(gathered.block_table.empty());
  CHECK(gathered.k == flat.k);
  CHECK(gathered.v == flat.v);
  HostTensors unchanged = flat;
  gather_paged(unchanged);  // a contiguous cache stays as it is
  CHECK(unchanged.k == flat.k);
}

// The reference output of `inputs` read another way, as a variant making that mistake returns it.
std::vector<float> as_floats(const std::vector<double>& values) {
  return std::vector<float>(values.begin(), values.end());
}

TEST_CASE("the oracle catches a wrong page read and a sequence read past its length",
          "[serving][oracle]") {
  const Shape shape = paged_ragged_shape();
  const HostTensors inputs = make_inputs(shape, Distribution::normal, 11);
  const double scale = 0.25;
  const std::vector<float> right = as_floats(reference_output(inputs, scale));
  CHECK(check_against_reference(inputs, scale, right, nullptr, Precision::fp32, OracleOptions{})
            .passed);

  // Pages read in pool order, as if the block table were the identity.
  HostTensors unshuffled = inputs;
  for (int64_t b = 0, next = 0; b < shape.batch; ++b)
    for (int64_t p = 0; p < shape.pages_per_sequence(); ++p) {
      int32_t& entry = unshuffled.block_table[static_cast<std::size_t>(b * 5 + p)];
      if (entry >= 0) entry = static_cast<int32_t>(next++);
    }
  const OracleReport wrong_page =
      check_against_reference(inputs, scale, as_floats(reference_output(unshuffled, scale)),
                              nullptr, Precision::fp32, OracleOptions{});
  CHECK_FALSE(wrong_page.passed);

  // A page of one sequence swapped with a page of another (two pages of one sequence swapped
  // would go unseen without a mask or ALiBi: attention without them does not see key order).
  HostTensors swapped = inputs;
  std::swap(swapped.block_table[5],
            swapped.block_table[15]);  // sequence 1 page 0, sequence 3 page 0
  CHECK_FALSE(check_against_reference(inputs, scale, as_floats(reference_output(swapped, scale)),
                                      nullptr, Precision::fp32, OracleOptions{})
                  .passed);

  // A contiguous ragged batch read as if every sequence held seq_kv keys (its zero padding).
  Shape ragged = shape;
  ragged.kv_cache = KvCacheSpec::contiguous();
  const HostTensors ragged_inputs = make_inputs(ragged, Distribution::normal, 11);
  HostTensors padded = ragged_inputs;
  padded.shape.kv_lens.clear();
  padded.shape.set_mask(MaskSpec::none());  // the causal rows of sequence 2 would see no key
  padded.shape.seq_q = ragged.seq_q;
  const OracleReport past_end =
      check_against_reference(ragged_inputs, scale, as_floats(reference_output(padded, scale)),
                              nullptr, Precision::fp32, OracleOptions{});
  CHECK_FALSE(past_end.passed);
}

TEST_CASE("paged and ragged cases pass through the sweep runner on naive", "[serving][runner]") {
  const SweepConfig config = serving_config(
      "seq_q = [1, 3]\nkv_lens = [\"3,20,9\"]\nmask = [\"none\", \"causal\"]\n"
      "kv_cache = [\"contiguous\", \"paged:4\"]\nheads = 4\nkv_heads = 2\nd_k = 16\n"
      "dtype = [\"fp32\", \"bf16\"]\n");
  const std::vector<Case> cases = expand_cases(config, {"naive"});
  REQUIRE(cases.size() == 16);
  SweepRunner runner(config, MeasuredPeaks{});
  std::vector<CaseRecord> records;
  const SweepOutcome outcome = runner.check(cases, &records);
  CHECK(outcome.ok == 16);
  CHECK(outcome.failed == 0);
  // A record per case and input distribution.
  REQUIRE(records.size() == 16 * all_distributions().size());
  for (const CaseRecord& record : records) {
    INFO(record.sweep_case.id << ": " << record.reason);
    CHECK(record.status == CaseStatus::ok);
    const nlohmann::ordered_json json = to_json(record);
    CHECK(json["kv_lens"] == nlohmann::ordered_json({3, 20, 9}));
    CHECK(json["kv_cache"] == to_string(record.sweep_case.shape.kv_cache));
  }
}

TEST_CASE("variants without ragged or paged support skip those cases with the reason",
          "[serving][runner]") {
  VariantInfo info;
  info.name = "plain";
  info.capabilities.gqa = true;
  info.capabilities.causal = true;
  CHECK_THAT(unsupported_reason(info, paged_ragged_shape(), false),
             Catch::Contains("does not take ragged batches"));
  Shape paged = testing::serving(testing::make_shape(1, 2, 2, 1, 40, 16, 16, false), {}, 16);
  CHECK_THAT(unsupported_reason(info, paged, false),
             Catch::Contains("does not read paged KV caches"));
}

TEST_CASE("bytes moved count each sequence's own keys, the table, and no padding",
          "[serving][work]") {
  Shape ragged = testing::serving(testing::make_shape(1, 8, 2, 1, 1, 16, 16, false), {10, 30}, 0);
  const WorkCount contiguous = count_work(ragged);
  // K and V: (10 + 30) keys * 2 KV heads * (16 + 16) values; Q and O: 2 * 8 heads * 16 each.
  CHECK(contiguous.min_bytes == Approx(((10 + 30) * 2 * 32 + 2 * 2 * 8 * 16) * 4.0));
  CHECK(contiguous.pairs == Approx(20));
  CHECK(contiguous.flops == Approx(2.0 * 2 * 8 * 20 * 32));
  ragged.kv_cache = KvCacheSpec::paged(16);
  // The block table: 2 sequences * ceil(30 / 16) entries of 4 bytes.
  CHECK(count_work(ragged).min_bytes == Approx(contiguous.min_bytes + 2 * 2 * 4));
  ragged.dtype = DType::bf16;
  CHECK(count_work(ragged).min_bytes == Approx(contiguous.min_bytes / 2 + 2 * 2 * 4));
}

TEST_CASE("a cache too large for the memory cap is refused before allocation, naming the size",
          "[serving][runner]") {
  const Shape huge = testing::serving(testing::make_shape(1, 32, 8, 1, 1, 128, 128, false),
                                      {16777216, 16777216}, 16);
  MeasureConfig measure;
  measure.memory_cap_gb = 8;
  CHECK_THAT(over_memory_cap(measure, huge, 0), Catch::Contains("over memory_cap_gb 8"));
  // Some 512 GiB of K and V in fp32 and the dtype, and the oracle's float64 rows per thread.
  CHECK_THAT(over_memory_cap(measure, huge, 0),
             Catch::Matches("needs [5-9][0-9][0-9]\\.[0-9] GiB .*"));
}

}  // namespace
}  // namespace attnbench
