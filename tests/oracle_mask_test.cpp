// The oracle's masks and score modifiers, on cases small enough to work out by hand. Equal scores
// (q = 0) make each row the mean of the values it sees, which shows the mask alone.
#include <catch2/catch.hpp>
#include <cmath>

#include "harness/measure/oracle.h"
#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

Shape masked(int64_t heads, int64_t seq_q, int64_t seq_kv, MaskSpec mask) {
  Shape s = testing::make_shape(1, heads, heads, seq_q, seq_kv, 1, 1, false);
  s.set_mask(std::move(mask));
  return s;
}

// d = 1 everywhere; Q = 0 gives equal scores.
HostTensors equal_scores(const Shape& s, std::vector<float> v) {
  return HostTensors{s,
                     std::vector<float>(static_cast<std::size_t>(s.q_elements()), 0.0f),
                     std::vector<float>(static_cast<std::size_t>(s.k_elements()), 1.0f),
                     std::move(v),
                     {},
                     {},
                     {}};
}

TEST_CASE("window:1 rows average the key at their position and the one before", "[oracle][mask]") {
  const auto o =
      reference_output(equal_scores(masked(1, 4, 4, MaskSpec::window(1)), {1, 2, 4, 8}), 1.0);
  const std::vector<double> means{1, 1.5, 3, 6};
  for (std::size_t row = 0; row < means.size(); ++row) CHECK(o[row] == Approx(means[row]));
}

TEST_CASE("window aligns to the end when seq_q < seq_kv", "[oracle][mask]") {
  // Rows 0, 1 sit at keys 3, 4; window:2 shows keys 1..3 and 2..4.
  const auto o =
      reference_output(equal_scores(masked(1, 2, 5, MaskSpec::window(2)), {1, 2, 4, 8, 16}), 1.0);
  CHECK(o[0] == Approx(14.0 / 3));
  CHECK(o[1] == Approx(28.0 / 3));
}

TEST_CASE("prefix:3 rows see the whole prefix, then causally", "[oracle][mask]") {
  std::vector<double> weights;
  const auto o = reference_output(equal_scores(masked(1, 4, 4, MaskSpec::prefix(3)), {1, 2, 4, 8}),
                                  1.0, &weights);
  CHECK(o[0] == Approx(7.0 / 3));  // row 0 sees keys 0..2, one of them ahead of it
  CHECK(o[2] == Approx(7.0 / 3));
  CHECK(o[3] == Approx(15.0 / 4));
  CHECK(weights[3] == 0.0);  // row 0, key 3
}

TEST_CASE("documents 2, 3: causal within a document, nothing across", "[oracle][mask]") {
  std::vector<double> weights;
  const auto o = reference_output(
      equal_scores(masked(1, 5, 5, MaskSpec::documents({2, 3})), {1, 2, 3, 4, 5}), 1.0, &weights);
  const std::vector<double> means{1, 1.5, 3, 3.5, 4};
  for (std::size_t row = 0; row < means.size(); ++row) CHECK(o[row] == Approx(means[row]));
  // Row 2 starts the second document: it sees key 2 alone.
  CHECK(weights[2 * 5 + 0] == 0.0);
  CHECK(weights[2 * 5 + 1] == 0.0);
  CHECK(weights[2 * 5 + 2] == 1.0);
}

TEST_CASE("ALiBi: equal scores weigh keys by exp(-slope * distance)", "[oracle][mask]") {
  // 8 heads: head 0's slope is 2^-1, head 7's 2^-8. One query at key 2 (causal, seq_kv 3):
  // distances 2, 1, 0.
  Shape s = masked(8, 1, 3, MaskSpec::causal());
  s.alibi = true;
  std::vector<float> v;
  for (int h = 0; h < 8; ++h) v.insert(v.end(), {3, 5, 10});
  std::vector<double> weights;
  const auto o = reference_output(equal_scores(s, v), 1.0, &weights);
  for (int h : {0, 7}) {
    const double slope = h == 0 ? 0.5 : 1.0 / 256;
    const double w0 = std::exp(-2 * slope), w1 = std::exp(-slope), w2 = 1.0;
    const double sum = w0 + w1 + w2;
    INFO("head " << h);
    CHECK(weights[h * 3 + 0] == Approx(w0 / sum).epsilon(1e-12));
    CHECK(weights[h * 3 + 2] == Approx(w2 / sum).epsilon(1e-12));
    CHECK(o[h] == Approx((3 * w0 + 5 * w1 + 10 * w2) / sum).epsilon(1e-12));
  }
}

TEST_CASE("ALiBi penalises a key ahead of the query by its distance too", "[oracle][mask]") {
  // No mask, seq 2, 8 heads, head 0 (slope 1/2): row 0 sits at key 0 and sees key 1 one ahead.
  Shape s = masked(8, 2, 2, MaskSpec::none());
  s.alibi = true;
  std::vector<double> weights;
  reference_output(equal_scores(s, std::vector<float>(16, 1.0f)), 1.0, &weights);
  CHECK(weights[1] == Approx(std::exp(-0.5) / (1 + std::exp(-0.5))).epsilon(1e-12));
  CHECK(weights[2] == Approx(std::exp(-0.5) / (1 + std::exp(-0.5))).epsilon(1e-12));
}

TEST_CASE("soft-capping: scores 0 and 2 atanh(ln 3 / 2), capped at 2, weigh 1/4 and 3/4",
          "[oracle][mask]") {
  // 2 tanh(a / 2) = ln 3 for a = 2 atanh(ln 3 / 2): the capped scores are 0 and ln 3.
  Shape s = masked(1, 1, 2, MaskSpec::none());
  s.softcap = 2;
  const float a = static_cast<float>(2 * std::atanh(std::log(3.0) / 2));
  std::vector<double> weights;
  const auto o =
      reference_output(HostTensors{s, {1.0f}, {0.0f, a}, {1.0f, 5.0f}, {}, {}, {}}, 1.0, &weights);
  // The key's fp32 rounding moves the capped score by under 1e-7.
  CHECK(weights[0] == Approx(0.25).epsilon(1e-6));
  CHECK(weights[1] == Approx(0.75).epsilon(1e-6));
  CHECK(o[0] == Approx(4.0).epsilon(1e-6));
}

TEST_CASE("soft-capping applies to the scaled score, before the ALiBi bias", "[oracle][mask]") {
  // 8 heads, head 0 (slope 1/2); one query at key 1 (causal, seq_kv 2); scale 2; raw q.k = 1, 0.
  // Scaled 2 and 0; capped at 1: tanh(2) and 0; biased by -1/2 and 0 (distances 1 and 0).
  Shape s = masked(8, 1, 2, MaskSpec::causal());
  s.alibi = true;
  s.softcap = 1;
  std::vector<float> q(8, 1.0f), k(16, 0.0f), v(16, 0.0f);
  for (int h = 0; h < 8; ++h) k[h * 2] = 1.0f;  // key 0 of each head scores 1
  std::vector<double> weights;
  reference_output(HostTensors{s, q, k, v, {}, {}, {}}, 2.0, &weights);
  const double s0 = std::tanh(2.0) - 0.5;
  CHECK(weights[0] == Approx(std::exp(s0) / (std::exp(s0) + 1)).epsilon(1e-12));
}

TEST_CASE("the oracle fails a weight the window hides at the start of the row", "[oracle][mask]") {
  const Shape s = masked(1, 6, 6, MaskSpec::window(1));
  const HostTensors in = equal_scores(s, {1, 2, 3, 4, 5, 6});
  std::vector<double> reference_weights;
  const auto reference = reference_output(in, 1.0, &reference_weights);
  const std::vector<float> o(reference.begin(), reference.end());
  std::vector<float> weights(reference_weights.begin(), reference_weights.end());
  REQUIRE(check_against_reference(in, 1.0, o, &weights, Precision::fp32, {}).passed);
  weights[5 * 6 + 0] = 1e-30f;  // row 5 sees keys 4 and 5 only
  const OracleReport report = check_against_reference(in, 1.0, o, &weights, Precision::fp32, {});
  CHECK_FALSE(report.passed);
  CHECK_THAT(report.failure, Catch::Contains("masked weight"));
}

}  // namespace
}  // namespace attnbench
