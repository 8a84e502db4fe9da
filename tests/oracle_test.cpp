// The oracle checked against cases small enough to work out by hand, and against the failures
// it exists to catch.
#include "harness/measure/oracle.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "harness/measure/inputs.h"
#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

using testing::make_shape;

HostTensors tensors(const Shape& shape, std::vector<float> q, std::vector<float> k,
                    std::vector<float> v) {
  return HostTensors{shape, std::move(q), std::move(k), std::move(v), {}, {}, {}};
}

std::vector<float> as_floats(const std::vector<double>& values) {
  return std::vector<float>(values.begin(), values.end());
}

TEST_CASE("one key: the output is that key's value", "[oracle]") {
  const HostTensors in =
      tensors(make_shape(1, 1, 1, 1, 1, 2, 3, false), {0.3f, -2.0f}, {1.0f, 4.0f}, {1, 2, 3});
  std::vector<double> weights;
  const auto o = reference_output(in, 0.5, &weights);
  CHECK(o == std::vector<double>{1, 2, 3});
  CHECK(weights == std::vector<double>{1.0});
}

TEST_CASE("two keys scoring 0 and ln 3 get weights 1/4 and 3/4", "[oracle]") {
  // d = 1, scale 1: scores are q*k = 0 and ln 3; softmax gives 1/4 and 3/4; o = 1/4*1 + 3/4*5 = 4.
  const HostTensors in = tensors(make_shape(1, 1, 1, 1, 2, 1, 1, false), {1.0f},
                                 {0.0f, static_cast<float>(std::log(3.0))}, {1.0f, 5.0f});
  std::vector<double> weights;
  const auto o = reference_output(in, 1.0, &weights);
  CHECK(weights[0] == Approx(0.25).epsilon(1e-7));
  CHECK(weights[1] == Approx(0.75).epsilon(1e-7));
  CHECK(o[0] == Approx(4.0).epsilon(1e-7));
}

TEST_CASE("the causal mask is aligned to the end when seq_q < seq_kv", "[oracle]") {
  // seq_q 2, seq_kv 3: row 0 sees keys 0..1, row 1 sees all three. Equal scores (q = 0) make
  // each row the mean of the values it sees.
  const HostTensors in =
      tensors(make_shape(1, 1, 1, 2, 3, 1, 1, true), {0, 0}, {1, 1, 1}, {3, 5, 10});
  std::vector<double> weights;
  const auto o = reference_output(in, 1.0, &weights);
  CHECK(o[0] == Approx(4.0));
  CHECK(o[1] == Approx(6.0));
  CHECK(weights == std::vector<double>{0.5, 0.5, 0.0, 1.0 / 3, 1.0 / 3, 1.0 / 3});
}

TEST_CASE("GQA: query heads share their group's key/value head", "[oracle]") {
  // 4 query heads, 2 kv heads: heads 0,1 read kv head 0 (value 7), heads 2,3 kv head 1 (value -2).
  const HostTensors in =
      tensors(make_shape(1, 4, 2, 1, 1, 1, 1, false), {1, 1, 1, 1}, {1, 1}, {7, -2});
  CHECK(reference_output(in, 1.0) == std::vector<double>{7, 7, -2, -2});
}

TEST_CASE("the tutorial's shapes: batch 2, seq 5, d 16", "[oracle]") {
  const Shape shape = make_shape(2, 1, 1, 5, 5, 16, 16, false);
  const HostTensors in = make_inputs(shape, Distribution::normal, 7);
  std::vector<double> weights;
  const auto o = reference_output(in, 0.25, &weights);
  CHECK(o.size() == 2u * 5 * 16);       // output (2, 5, 16)
  CHECK(weights.size() == 2u * 5 * 5);  // weights (2, 5, 5)
  for (int row = 0; row < 10; ++row) {
    double sum = 0;
    for (int j = 0; j < 5; ++j) sum += weights[row * 5 + j];
    CHECK(sum == Approx(1.0).epsilon(1e-12));
  }
}

TEST_CASE("large scores do not overflow the float64 reference", "[oracle]") {
  const Shape shape = make_shape(1, 1, 1, 8, 300, 64, 64, false);
  const HostTensors in = make_inputs(shape, Distribution::large_scores, 3);
  for (double value : reference_output(in, 0.125)) CHECK(std::isfinite(value));
}

struct Fixture {
  Shape shape = make_shape(2, 2, 1, 20, 30, 8, 8, true);
  HostTensors in = make_inputs(shape, Distribution::normal, 11);
  std::vector<double> reference_weights;
  std::vector<float> o = as_floats(reference_output(in, 0.35, &reference_weights));
  std::vector<float> weights = as_floats(reference_weights);
  OracleReport check(bool with_weights = false, OracleOptions options = {}) const {
    return check_against_reference(in, 0.35, o, with_weights ? &weights : nullptr, Precision::fp32,
                                   options);
  }
};

TEST_CASE("the oracle judges an O that cancels against the norm of its terms", "[oracle]") {
  // Two keys of equal score (q = 0): O = (v0 + v1) / 2 = 1e-4 from terms of about 0.3 each. A
  // float32 sum of the terms is off by about u times them (1e-8), which against O itself is a
  // relative error of 1e-4, ten times the fp32 tolerance: what naive's own sums gave, on a
  // window of three keys with d_v 1. Against the terms' norm it is 3e-8.
  const HostTensors in =
      tensors(make_shape(1, 1, 1, 1, 2, 1, 1, false), {0.0f}, {0.5f, -0.7f}, {0.6001f, -0.5999f});
  const std::vector<double> reference = reference_output(in, 1.0);
  REQUIRE(std::abs(reference[0]) < 2e-4);
  const float rounding = 1.2e-8f;  // u = 6e-8 of the terms' 0.3, twice
  const std::vector<float> rounded{static_cast<float>(reference[0]) + rounding};
  const OracleReport report =
      check_against_reference(in, 1.0, rounded, nullptr, Precision::fp32, OracleOptions{});
  INFO(report.failure);
  CHECK(report.passed);
  // A term's worth of error (one key's p v dropped) still fails, by far.
  const std::vector<float> one_key_missing{static_cast<float>(reference[0] - 0.5 * 0.6001)};
  CHECK_FALSE(
      check_against_reference(in, 1.0, one_key_missing, nullptr, Precision::fp32, OracleOptions{})
          .passed);
  // And an error of 1e-5: 2.4e-5 against the terms' norm (0.42), over the tolerance.
  const std::vector<float> off{static_cast<float>(reference[0]) + 1e-5f};
  CHECK_FALSE(
      check_against_reference(in, 1.0, off, nullptr, Precision::fp32, OracleOptions{}).passed);
}

TEST_CASE("the oracle passes the reference itself, rounded to fp32", "[oracle]") {
  const Fixture f;
  const OracleReport report = f.check(true);
  INFO(report.failure);
  CHECK(report.passed);
  CHECK(report.rel_l2_err < 1e-7);
  CHECK(report.rows_checked == 2 * 2 * 20);
}

TEST_CASE("the oracle fails what it must", "[oracle]") {
  Fixture f;
  SECTION("an unwritten (NaN-poisoned) element") {
    f.o[17] = std::numeric_limits<float>::quiet_NaN();
    const OracleReport report = f.check();
    CHECK_FALSE(report.passed);
    CHECK_THAT(report.failure, Catch::Contains("NaN"));
  }
  SECTION("an infinite element") {
    f.o[3] = std::numeric_limits<float>::infinity();
    CHECK_FALSE(f.check().passed);
  }
  SECTION("an error above the fp32 tolerance") {
    f.o[40] += 1e-2f;
    CHECK_FALSE(f.check().passed);
  }
  SECTION("a masked weight that is not exactly zero") {
    f.weights[29] = 1e-30f;  // row 0 sees keys 0..10 only
    const OracleReport report = f.check(true);
    CHECK_FALSE(report.passed);
    CHECK_THAT(report.failure, Catch::Contains("masked"));
  }
  SECTION("a weights row that does not sum to 1") {
    f.weights[0] += 0.01f;
    CHECK_FALSE(f.check(true).passed);
  }
  SECTION("a wrong last row, found by the sampled comparison") {
    OracleOptions sampled;
    sampled.full_check_max_n = 4;
    sampled.sample_rows = 5;
    f.o[f.o.size() - 1] += 1.0f;  // the last row of every (batch, head) is always sampled
    const OracleReport report = f.check(false, sampled);
    CHECK(report.sampled);
    // 2 x 2 heads' first and last rows, and up to 5 random ones (a repeat is compared once).
    CHECK(report.rows_checked > 2 * 2 * 2);
    CHECK(report.rows_checked <= 2 * 2 * 2 + 5);
    CHECK_FALSE(report.passed);
  }
}

}  // namespace
}  // namespace attnbench

namespace attnbench {
namespace {

TEST_CASE("the tolerance grows with the largest score, and only past well-conditioned scores",
          "[oracle]") {
  const Shape shape = testing::make_shape(1, 1, 1, 4, 200, 64, 64, false);
  for (Distribution distribution : {Distribution::normal, Distribution::large_scores}) {
    const HostTensors in = make_inputs(shape, distribution, 5);
    const auto reference = reference_output(in, 0.125);
    const std::vector<float> o(reference.begin(), reference.end());
    const OracleReport report = check_against_reference(in, 0.125, o, nullptr, Precision::fp32, {});
    const double base = tolerance_for(DType::fp32).rel_l2;
    if (distribution == Distribution::normal) {
      CHECK(report.max_abs_score < well_conditioned_max_score);
      CHECK(report.rel_l2_tolerance == base);
    } else {
      CHECK(report.max_abs_score > 88.7);  // past fp32's exp overflow
      CHECK(report.rel_l2_tolerance ==
            Approx(base * report.max_abs_score / well_conditioned_max_score));
    }
  }
}

TEST_CASE("the fp32 part of the tolerance grows as the root of the row length past 65536 keys",
          "[oracle]") {
  const double base = tolerance_for(DType::fp32).rel_l2;
  CHECK(conditioned_tolerance(DType::fp32, Precision::fp32, 0, 4096).rel_l2 == base);
  CHECK(conditioned_tolerance(DType::fp32, Precision::fp32, 0, 65536).rel_l2 == base);
  CHECK(conditioned_tolerance(DType::fp32, Precision::fp32, 0, 1 << 20).rel_l2 == Approx(4 * base));
  // With the largest score's conditioning, both apply; the largest element's bound does not grow.
  CHECK(conditioned_tolerance(DType::fp32, Precision::fp32, 64, 1 << 18).rel_l2 ==
        Approx(base * 4 * 2));
  CHECK(conditioned_tolerance(DType::fp32, Precision::fp32, 0, 1 << 20).max_abs ==
        tolerance_for(DType::fp32).max_abs);
  // bf16: its own rounding budget stays; the fp32 floor beside it grows.
  const double bf16 = tolerance_for(DType::bf16).rel_l2;
  CHECK(conditioned_tolerance(DType::bf16, Precision::fp32, 0, 1 << 20).rel_l2 ==
        Approx(bf16 + 4 * base));
}

}  // namespace
}  // namespace attnbench
