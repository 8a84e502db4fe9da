// Quantized KV caches (kv_quant.h): the codecs on known values, the quantizer's round-trip bounds,
// naive and flash_cpu reading int8 and fp8_e4m3 caches (contiguous, paged, ragged, GQA) against
// the oracle, the record's quantization error and bytes_moved, and the config axis.
#include "harness/core/kv_quant.h"

#include <omp.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "harness/core/record.h"
#include "harness/core/work_count.h"
#include "harness/measure/inputs.h"
#include "harness/measure/kv_quantizer.h"
#include "harness/measure/oracle.h"
#include "harness/plan/config.h"
#include "harness/plan/sweep.h"
#include "harness/runner/case_budget.h"
#include "tests/edge_shapes.h"
#include "tests/flash_cpu_paths.h"
#include "tests/oracle_check.h"

namespace attnbench {
namespace {

// The E4M3 value of a code from the OCP definition, written independently of the bit trick:
// (-1)^s 2^(e - 7) (1 + m / 8) for e > 0, (-1)^s 2^-6 (m / 8) for e = 0.
double e4m3_by_definition(uint8_t code) {
  const int sign = code >> 7, exponent = (code >> 3) & 0xF, mantissa = code & 0x7;
  const double magnitude = exponent == 0 ? std::ldexp(mantissa / 8.0, -6)
                                         : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
  return sign ? -magnitude : magnitude;
}

TEST_CASE("fp8 e4m3 codes decode as the OCP format defines them", "[kv_quant]") {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F) continue;  // NaN: never written
    INFO("code " << code);
    CHECK(static_cast<double>(fp8_e4m3_value(static_cast<uint8_t>(code))) ==
          e4m3_by_definition(static_cast<uint8_t>(code)));
  }
  CHECK(fp8_e4m3_value(0x7E) == 448.0f);  // S.1111.110, the largest finite value
  CHECK(fp8_e4m3_value(0xFE) == -448.0f);
  CHECK(fp8_e4m3_value(0x01) == std::ldexp(1.0f, -9));  // the smallest subnormal, 2^-9
  CHECK(fp8_e4m3_value(0x08) == std::ldexp(1.0f, -6));  // the smallest normal
  CHECK(fp8_e4m3_value(0x38) == 1.0f);
}

TEST_CASE("fp8 e4m3 encoding rounds to nearest even and saturates at 448", "[kv_quant]") {
  // Every finite code encodes to itself (codes 0x00 and 0x80 both mean zero).
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F || code == 0x80) continue;
    const auto c = static_cast<uint8_t>(code);
    CHECK(fp8_e4m3_code(fp8_e4m3_value(c)) == c);
  }
  CHECK(fp8_e4m3_code(448.0f) == 0x7E);
  CHECK(fp8_e4m3_code(1e6f) == 0x7E);  // saturates: E4M3 has no infinity
  CHECK(fp8_e4m3_code(-1e6f) == 0xFE);
  CHECK(fp8_e4m3_code(470.0f) == 0x7E);  // would round to 480 (the NaN pattern): saturates
  CHECK(fp8_e4m3_code(std::ldexp(1.0f, -9)) == 0x01);
  CHECK(fp8_e4m3_code(std::ldexp(1.0f, -11)) == 0x00);  // a quarter of the smallest: to 0
  CHECK(fp8_e4m3_code(std::ldexp(3.0f, -11)) == 0x01);  // 0.75 of it: up to 2^-9
  // Halfway between 1 (0x38) and 1.125 (0x39): ties to the even mantissa, 1; between 1.125 and
  // 1.25: to 1.25 (0x3A).
  CHECK(fp8_e4m3_code(1.0625f) == 0x38);
  CHECK(fp8_e4m3_code(1.1875f) == 0x3A);
  // Every value in range lands within half a step (relative 2^-4 for normals) of itself.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-6.0f, 8.7f);
  for (int i = 0; i < 2000; ++i) {
    const float value = std::exp2(exponent(rng));
    const float back = fp8_e4m3_value(fp8_e4m3_code(value));
    CHECK(std::fabs(back - value) <= value * 0x1p-4f);
  }
}

TEST_CASE("int8 rows round-trip within half a step of their own scale", "[kv_quant]") {
  const int64_t rows = 64, dim = 32;
  std::vector<float> values(static_cast<std::size_t>(rows * dim));
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (float& x : values) x = normal(rng);
  for (int64_t c = 0; c < dim; ++c) values[static_cast<std::size_t>(5 * dim + c)] = 0.0f;
  const std::vector<float> original = values;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  quantize_rows_int8(values, rows, dim, codes, scales);
  REQUIRE(scales.size() == static_cast<std::size_t>(rows));
  CHECK(scales[5] == 0.0f);  // an all-zero row: scale 0, codes 0, values 0
  for (int64_t r = 0; r < rows; ++r) {
    float largest = 0;
    for (int64_t c = 0; c < dim; ++c)
      largest = std::max(largest, std::fabs(original[static_cast<std::size_t>(r * dim + c)]));
    CHECK(scales[static_cast<std::size_t>(r)] == largest / 127.0f);
    for (int64_t c = 0; c < dim; ++c) {
      const auto i = static_cast<std::size_t>(r * dim + c);
      int8_t code;
      std::memcpy(&code, &codes[i], 1);
      CHECK(code >= -127);
      CHECK(values[i] == static_cast<float>(code) * scales[static_cast<std::size_t>(r)]);
      CHECK(std::fabs(values[i] - original[i]) <=
            0.5f * scales[static_cast<std::size_t>(r)] * (1 + 1e-6f));
    }
  }
}

Shape quantized(Shape s, KvDType kv_dtype) {
  s.kv_dtype = kv_dtype;
  return s;
}

// Decode and a short prefill over small GQA caches (32/8-like ratios), contiguous and paged, and
// ragged, each in int8 and fp8_e4m3, in fp32 and bf16.
std::vector<testing::NamedShape> quantized_shapes() {
  std::vector<testing::NamedShape> shapes;
  for (KvDType kv_dtype : {KvDType::int8, KvDType::fp8_e4m3})
    for (DType dtype : {DType::fp32, DType::bf16}) {
      const std::string tag = std::string(to_string(kv_dtype)) + " " + to_string(dtype);
      Shape decode = testing::make_shape(2, 8, 2, 1, 300, 64, 64, false);
      decode.dtype = dtype;
      shapes.push_back({"decode contiguous " + tag, quantized(decode, kv_dtype)});
      shapes.push_back(
          {"decode paged:16 " + tag, quantized(testing::serving(decode, {}, 16), kv_dtype)});
      shapes.push_back({"decode ragged paged:7 " + tag,
                        quantized(testing::serving(decode, {5, 300, 41}, 7), kv_dtype)});
      Shape verify = testing::make_shape(1, 4, 1, 4, 130, 32, 48, true);
      verify.dtype = dtype;
      verify.layout = Layout::bshd;
      shapes.push_back({"verify causal bshd ragged " + tag,
                        quantized(testing::serving(verify, {130, 9}, 0), kv_dtype)});
    }
  return shapes;
}

TEST_CASE("naive and flash_cpu read quantized caches within the oracle's tolerance",
          "[kv_quant][oracle]") {
  const auto shapes = quantized_shapes();
  for (const char* name : {"naive", "flash_cpu"}) {
    const RegisteredVariant* registered = Registry::instance().find(name);
    REQUIRE(registered != nullptr);
    for (const testing::NamedShape& named : shapes)
      CHECK(unsupported_reason(registered->info, named.shape, false).empty());
    for (int threads : {1, 3}) {
      omp_set_num_threads(threads);
      testing::check_against_oracle(*registered, shapes, false, {Distribution::normal},
                                    [](Distribution) { return uint64_t{11}; });
    }
  }
  omp_set_num_threads(omp_get_num_procs());
}

TEST_CASE("flash_cpu reads quantized caches within the oracle's tolerance on every path",
          "[kv_quant][oracle][flash_cpu]") {
  // Each path's own widening of the codes (vpmovsxbd on AVX-512 and AVX2, vector extensions
  // elsewhere), the AVX-512 one on emulated AVX-512 where the CPU has none.
  const auto shapes = quantized_shapes();
  for (const std::string& isa : testing::isa_names_built()) {
    if (!testing::cpu_supports(isa)) continue;
    const testing::ScopedEnvironment chosen(testing::kIsaVariable, isa);
    INFO("path " << isa);
    testing::check_against_oracle(testing::flash_cpu(), shapes, false, {Distribution::normal},
                                  [](Distribution) { return uint64_t{12}; });
  }
}

TEST_CASE("a variant that reads no quantized cache refuses the case by name", "[kv_quant]") {
  const RegisteredVariant* blocked = Registry::instance().find("blocked");
  REQUIRE(blocked != nullptr);
  const Shape s = quantized(testing::make_shape(1, 4, 4, 1, 64, 32, 32, false), KvDType::int8);
  CHECK(unsupported_reason(blocked->info, s, false) == "blocked does not read int8 KV caches");
  Shape backward = s;
  backward.pass = Pass::bwd;
  CHECK(unsupported_reason(Registry::instance().find("naive")->info, backward, false) ==
        "the backward pass takes no quantized KV cache (kv_dtype)");
}

TEST_CASE("the quantized inputs: the oracle reads code * scale, the error is the cache's own",
          "[kv_quant]") {
  Shape s = testing::serving(testing::make_shape(2, 8, 2, 1, 200, 64, 64, false), {200, 37}, 16);
  const HostTensors plain = make_inputs(s, Distribution::normal, 5);
  double errors[2] = {0, 0};
  int i = 0;
  for (KvDType kv_dtype : {KvDType::int8, KvDType::fp8_e4m3}) {
    const HostTensors q = make_inputs(quantized(s, kv_dtype), Distribution::normal, 5);
    // The same draw as the unquantized twin, kept beside the dequantized values.
    CHECK(q.q == plain.q);
    CHECK(q.quantized.k_exact == plain.k);
    CHECK(q.quantized.v_exact == plain.v);
    CHECK(q.block_table == plain.block_table);
    REQUIRE(static_cast<int64_t>(q.quantized.k_scales.size()) == kv_scale_count(q.shape));
    REQUIRE(q.quantized.k_codes.size() == q.k.size());
    CHECK(q.k != plain.k);
    const double error = kv_quant_error(q, default_scale(s), OracleOptions{});
    errors[i++] = error;
    // int8 per row: about 1/127 of a row's largest over sqrt(12) per value; fp8 e4m3: 3 mantissa
    // bits, 2^-4 relative at most. Both far from 0 and far below 1.
    CHECK(error > 1e-4);
    CHECK(error < 0.1);
  }
  INFO("int8 " << errors[0] << ", fp8_e4m3 " << errors[1]);
  CHECK(errors[0] < errors[1]);  // 8 bits per row beat 3 mantissa bits per sequence
}

TEST_CASE("bytes_moved counts the codes and the scales", "[kv_quant][work]") {
  // B 2, H 32/8, seq_q 1, seq_kv 4096, d 128, bf16 Q and O.
  Shape s = testing::make_shape(2, 32, 8, 1, 4096, 128, 128, false);
  s.dtype = DType::bf16;
  const double q_and_o = 2.0 * (2 * 32 * 1 * 128) * 2;  // Q and O elements at 2 bytes
  const double kv_rows = 2.0 * 8 * 4096;                // (sequence, KV head, key) rows
  CHECK(count_work(s).min_bytes == q_and_o + kv_rows * 256 * 2);
  CHECK(count_work(quantized(s, KvDType::int8)).min_bytes ==
        q_and_o + kv_rows * 256 * 1 + 2 * kv_rows * 4);  // codes + a K and a V scale per row
  CHECK(count_work(quantized(s, KvDType::fp8_e4m3)).min_bytes ==
        q_and_o + kv_rows * 256 * 1 + 2 * (2 * 8) * 4);  // codes + a K and a V scale per (b, h)
  // Paged: each sequence's own keys (not the last page's tail), plus the block table.
  Shape paged = testing::serving(s, {4096, 1000}, 16);
  const double own_rows = 8.0 * (4096 + 1000);
  const double table = 2.0 * (4096 / 16) * 4;
  CHECK(count_work(quantized(paged, KvDType::int8)).min_bytes ==
        q_and_o + own_rows * 256 + 2 * own_rows * 4 + table);
}

TEST_CASE("records carry kv_dtype and the quantization error", "[kv_quant][record]") {
  CaseRecord record;
  record.sweep_case.shape = testing::make_shape(1, 4, 4, 1, 64, 32, 32, false);
  record.sweep_case.shape.dtype = DType::bf16;
  auto json = to_json(record);
  CHECK(json["kv_dtype"] == "bf16");  // unquantized: the case's dtype
  CHECK(json["kv_quant_rel_l2_err"].is_null());
  record.sweep_case.shape.kv_dtype = KvDType::fp8_e4m3;
  record.kv_quant_rel_l2_err = 0.0125;
  json = to_json(record);
  CHECK(json["kv_dtype"] == "fp8_e4m3");
  CHECK(json["kv_quant_rel_l2_err"] == 0.0125);
  const auto& columns = csv_fields();
  CHECK(std::find(columns.begin(), columns.end(), "kv_dtype") != columns.end());
  CHECK(std::find(columns.begin(), columns.end(), "kv_quant_rel_l2_err") != columns.end());
}

const std::string decode_config = R"(
name = "t"
variants = ["naive"]
[axes]
seq_q = [1]
seq_kv = [64]
)";

TEST_CASE("the kv_dtype axis: values, case ids, and a one-line error", "[kv_quant][config]") {
  const SweepConfig config =
      parse_config(decode_config + "kv_dtype = [\"dtype\", \"int8\", \"fp8_e4m3\"]\n", "t.toml");
  const std::vector<Case> cases = expand_cases(config, {"naive"});
  REQUIRE(cases.size() == 3);
  CHECK(cases[0].id.find("kv_dtype") == std::string::npos);  // the default keeps its id
  CHECK(cases[1].id.find("|kv_dtype:int8") != std::string::npos);
  CHECK(cases[2].id.find("|kv_dtype:fp8_e4m3") != std::string::npos);
  std::string error;
  try {
    parse_config(decode_config + "kv_dtype = [\"int4\"]\n", "t.toml");
  } catch (const ConfigError& e) {
    error = e.what();
  }
  CHECK(error.find("axes.kv_dtype") != std::string::npos);
  CHECK(error.find("'int4'") != std::string::npos);
  CHECK(error.find('\n') == std::string::npos);
}

TEST_CASE("the memory cap counts what a quantized cache holds beside the case's tensors",
          "[kv_quant][budget]") {
  // The unquantized K and V kept for kv_quant_rel_l2_err, the codes as quantized and as packed,
  // and the scales: a case over the cap with them must not be admitted without them.
  Shape s = testing::make_shape(1, 32, 8, 1, 131072, 128, 128, false);
  s.dtype = DType::bf16;
  const auto kv = static_cast<double>(s.k_elements() + s.v_elements());
  const double extra = host_harness_bytes(quantized(s, KvDType::int8)) - host_harness_bytes(s);
  CHECK(extra >= kv * sizeof(float) + 2 * kv);
  CHECK(host_harness_bytes(quantized(s, KvDType::fp8_e4m3)) >= host_harness_bytes(s) + extra / 2);
}

}  // namespace
}  // namespace attnbench
