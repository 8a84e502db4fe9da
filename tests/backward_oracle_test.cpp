// The backward oracle against gradients worked out by hand, its GQA sum, its tolerance and its
// sampling rule. Cheap: tiny shapes, and one of 40 x 40 sampled.
#include "harness/measure/backward_oracle.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "harness/core/element_types.h"
#include "harness/measure/inputs.h"

namespace attnbench {
namespace {

// One query, two keys, d = 1: q = 1, k = (0, 1), v = (1, 3), dO = 1, scale 1.
HostTensors two_key_problem() {
  HostTensors in;
  in.shape.seq_q = 1;
  in.shape.seq_kv = 2;
  in.shape.pass = Pass::bwd;
  in.q = {1};
  in.k = {0, 1};
  in.v = {1, 3};
  in.dout = {1};
  return in;
}

TEST_CASE("backward oracle: gradients of a two-key problem worked by hand", "[oracle][backward]") {
  // Scores (0, 1), so p0 = 1 / (1 + e), p1 = e / (1 + e) and O = p0 + 3 p1.
  // dV = P^T dO = (p0, p1). dP = dO V = (1, 3), D = dO O = O, so
  // dS0 = p0 (1 - O) = -2 p0 p1 and dS1 = p1 (3 - O) = 2 p0 p1 (as p0 + p1 = 1).
  // dQ = dS0 k0 + dS1 k1 = 2 p0 p1; dK = dS q = (-2 p0 p1, 2 p0 p1).
  const double e = std::exp(1.0);
  const double p0 = 1 / (1 + e), p1 = e / (1 + e);
  const Gradients<double> r = reference_gradients(two_key_problem(), 1.0);
  CHECK(r.dv[0] == Approx(p0).epsilon(1e-12));
  CHECK(r.dv[1] == Approx(p1).epsilon(1e-12));
  CHECK(r.dq[0] == Approx(2 * p0 * p1).epsilon(1e-12));
  CHECK(r.dk[0] == Approx(-2 * p0 * p1).epsilon(1e-12));
  CHECK(r.dk[1] == Approx(2 * p0 * p1).epsilon(1e-12));
}

// The two-key problem's gradients as a backward computes them from the O it read: D = dO O = o.
Gradients<float> two_key_gradients(double o) {
  const double e = std::exp(1.0);
  const double p0 = 1 / (1 + e), p1 = e / (1 + e);
  const double ds0 = p0 * (1 - o), ds1 = p1 * (3 - o);
  Gradients<float> got;
  got.dq = {static_cast<float>(ds1)};  // k = (0, 1)
  got.dk = {static_cast<float>(ds0), static_cast<float>(ds1)};
  got.dv = {static_cast<float>(p0), static_cast<float>(p1)};
  return got;
}

TEST_CASE("backward oracle: D takes the variant's O where it is near the reference, else not",
          "[oracle][backward]") {
  HostTensors in = two_key_problem();
  in.shape.dtype = DType::bf16;  // 1 and 3, q, k and dO are exact in bf16
  const double e = std::exp(1.0);
  const double o = (1 + 3 * e) / (1 + e);  // 2.46
  // The variant's O an ulp of bf16 (2^-6 at 2.46) above the reference's: its dQ, from that O,
  // is 0.0114 off the reference's 0.39 (2.9%, over the bf16 tolerance of 2.35%), which is O's
  // error, not the backward's.
  const float near = round_to(DType::bf16, static_cast<float>(o)) + 0.015625f;
  OracleReport report =
      check_gradients(in, 1.0, two_key_gradients(near), {near}, Precision::fp32, OracleOptions{});
  INFO(report.failure);
  CHECK(report.passed);
  CHECK_FALSE(
      check_gradients(in, 1.0, two_key_gradients(near), {}, Precision::fp32, OracleOptions{})
          .passed);
  // A wrong O (negated: past the forward's tolerance, in a row its sampled check may not read),
  // and gradients from it: D is not taken from it, so the backward is charged.
  const float wrong = -static_cast<float>(o);
  CHECK_FALSE(
      check_gradients(in, 1.0, two_key_gradients(wrong), {wrong}, Precision::fp32, OracleOptions{})
          .passed);
  // Nor from a NaN O, where a reference D of NaN would compare as nothing.
  const float nan = std::nanf("");
  const OracleReport with_nan =
      check_gradients(in, 1.0, two_key_gradients(wrong), {nan}, Precision::fp32, OracleOptions{});
  CHECK_FALSE(with_nan.passed);
  // Correct gradients pass whatever O the variant stored, as long as D need not come from it.
  CHECK(check_gradients(in, 1.0, two_key_gradients(o), {wrong}, Precision::fp32, OracleOptions{})
            .passed);
}

TEST_CASE("backward oracle: soft-capping scales dS by 1 - tanh^2, ALiBi adds nothing",
          "[oracle][backward]") {
  HostTensors in = two_key_problem();
  in.shape.softcap = 2;
  // Capped scores (0, 2 tanh(1/2)); dS_j = p_j (v_j - O) (1 - tanh^2(raw_j / 2)).
  const double c1 = 2 * std::tanh(0.5);
  const double p0 = 1 / (1 + std::exp(c1)), p1 = 1 - p0;
  const double o = p0 + 3 * p1;
  const double ds1 = p1 * (3 - o) * (1 - std::tanh(0.5) * std::tanh(0.5));
  const double ds0 = p0 * (1 - o);  // raw score 0: the derivative there is 1
  const Gradients<double> r = reference_gradients(in, 1.0);
  CHECK(r.dq[0] == Approx(ds1).epsilon(1e-12));
  CHECK(r.dk[0] == Approx(ds0).epsilon(1e-12));
  CHECK(r.dk[1] == Approx(ds1).epsilon(1e-12));
  CHECK(r.dv[1] == Approx(p1).epsilon(1e-12));

  // One head's ALiBi bias -slope |i - j| only shifts the scores: the same formulas hold with the
  // shifted weights, and no term of the bias reaches dQ or dK.
  HostTensors alibi = two_key_problem();
  alibi.shape.alibi = true;
  const double slope = alibi_slope(0, 1);
  // Row 0 sits at position 1 (aligned to the end): key 0 is one away, key 1 is the diagonal.
  const double q0 = 1 / (1 + std::exp(1 + slope)), q1 = 1 - q0;
  const Gradients<double> a = reference_gradients(alibi, 1.0);
  CHECK(a.dq[0] == Approx(2 * q0 * q1).epsilon(1e-12));
  CHECK(a.dk[0] == Approx(-2 * q0 * q1).epsilon(1e-12));
}

TEST_CASE("backward oracle: with GQA dK and dV sum over the group", "[oracle][backward]") {
  // Two query heads with the same Q and dO share one key head: its dK and dV are twice one
  // head's, and each head's dQ is the one head's.
  HostTensors one = make_inputs(
      [] {
        Shape s;
        s.seq_q = 5, s.seq_kv = 7, s.d_k = 3, s.d_v = 4, s.pass = Pass::bwd;
        return s;
      }(),
      Distribution::normal, 7);
  HostTensors two = one;
  two.shape.heads = 2;
  two.q.insert(two.q.end(), one.q.begin(), one.q.end());
  two.dout.insert(two.dout.end(), one.dout.begin(), one.dout.end());
  const Gradients<double> r1 = reference_gradients(one, 0.5), r2 = reference_gradients(two, 0.5);
  for (std::size_t x = 0; x < r1.dk.size(); ++x) CHECK(r2.dk[x] == Approx(2 * r1.dk[x]));
  for (std::size_t x = 0; x < r1.dv.size(); ++x) CHECK(r2.dv[x] == Approx(2 * r1.dv[x]));
  for (std::size_t x = 0; x < r1.dq.size(); ++x) {
    CHECK(r2.dq[x] == Approx(r1.dq[x]));
    CHECK(r2.dq[x + r1.dq.size()] == Approx(r1.dq[x]));
  }
}

Gradients<float> as_float(const Gradients<double>& r) {
  return {{r.dq.begin(), r.dq.end()}, {r.dk.begin(), r.dk.end()}, {r.dv.begin(), r.dv.end()}};
}

TEST_CASE("backward oracle: the tolerance is twice the forward's and decides",
          "[oracle][backward]") {
  const Tolerance forward = conditioned_tolerance(DType::bf16, Precision::fp32, 1.0);
  const Tolerance backward = gradient_tolerance(DType::bf16, Precision::fp32, 1.0);
  CHECK(backward.rel_l2 == Approx(2 * forward.rel_l2));
  CHECK(backward.max_abs == Approx(2 * forward.max_abs));

  Shape s;
  s.heads = 2, s.seq_q = 9, s.seq_kv = 11, s.d_k = 8, s.d_v = 6, s.pass = Pass::bwd;
  s.dtype = DType::bf16;
  const HostTensors in = make_inputs(s, Distribution::normal, 3);
  const Gradients<double> r = reference_gradients(in, 0.35);
  // Every dV element off by a fraction of the tolerance passes; past it, dV fails by name.
  for (double fraction : {0.5, 2.0}) {
    Gradients<float> got = as_float(r);
    for (float& x : got.dv) x *= static_cast<float>(1 + fraction * backward.rel_l2);
    const OracleReport report =
        check_gradients(in, 0.35, got, {}, Precision::fp32, OracleOptions{});
    INFO(report.failure);
    CHECK(report.passed == (fraction < 1));
    if (fraction > 1) CHECK(report.failure.rfind("dV relative L2 error", 0) == 0);
  }
}

// dQ of one head (bhsd, batch 1) computed as a bf16 kernel does: dS rounded to bf16 before
// dQ = scale dS K, the rest in float64; `dropped_key` (when >= 0) left out of every row's sum.
std::vector<float> dq_with_rounded_ds(const HostTensors& in, double scale, int64_t dropped_key) {
  const Shape& s = in.shape;
  std::vector<float> dq(static_cast<std::size_t>(s.seq_q * s.d_k), 0.0f);
  for (int64_t i = 0; i < s.seq_q; ++i) {
    std::vector<double> p(s.seq_kv), dp(s.seq_kv);
    double max = -1e300, sum = 0, d_term = 0;
    for (int64_t j = 0; j < s.seq_kv; ++j) {
      double score = 0;
      for (int64_t c = 0; c < s.d_k; ++c)
        score += double{in.q[i * s.d_k + c]} * in.k[j * s.d_k + c];
      p[j] = score * scale;
      max = std::max(max, p[j]);
    }
    for (double& x : p) sum += x = std::exp(x - max);
    std::vector<double> o(s.d_v, 0.0);
    for (int64_t j = 0; j < s.seq_kv; ++j) {
      p[j] /= sum;
      for (int64_t c = 0; c < s.d_v; ++c) {
        o[c] += p[j] * in.v[j * s.d_v + c];
        dp[j] += double{in.dout[i * s.d_v + c]} * in.v[j * s.d_v + c];
      }
    }
    for (int64_t c = 0; c < s.d_v; ++c)
      d_term += in.dout[i * s.d_v + c] * double{round_to(DType::bf16, static_cast<float>(o[c]))};
    for (int64_t j = 0; j < s.seq_kv; ++j) {
      if (j == dropped_key) continue;
      const double ds = round_to(DType::bf16, static_cast<float>(p[j] * (dp[j] - d_term)));
      for (int64_t c = 0; c < s.d_k; ++c)
        dq[i * s.d_k + c] += static_cast<float>(scale * ds * in.k[j * s.d_k + c]);
    }
  }
  return dq;
}

TEST_CASE("backward oracle: with near-equal keys dQ is judged against the size of its terms",
          "[oracle][backward]") {
  // near_constant keys share one direction (plus 1e-3 noise, below bf16's resolution), and each
  // row's dS sums to zero, so dQ = scale sum_j dS_ij K_j cancels to far below its terms: dS
  // rounded to bf16 moves it by ~u times the terms, many times dQ itself. That passes; a dQ with
  // one key's term left out, an error of a whole term, fails.
  Shape s;
  s.seq_q = 16, s.seq_kv = 64, s.d_k = 32, s.d_v = 32, s.pass = Pass::bwd;
  s.dtype = DType::bf16;
  const HostTensors in = make_inputs(s, Distribution::near_constant, 5);
  const double scale = 1 / std::sqrt(32.0);
  Gradients<float> got = as_float(reference_gradients(in, scale));
  got.dq = dq_with_rounded_ds(in, scale, -1);
  OracleReport report = check_gradients(in, scale, got, {}, Precision::fp32, OracleOptions{});
  INFO(report.failure);
  CHECK(report.passed);
  got.dq = dq_with_rounded_ds(in, scale, 7);
  report = check_gradients(in, scale, got, {}, Precision::fp32, OracleOptions{});
  CHECK_FALSE(report.passed);
  CHECK(report.failure.rfind("dQ relative L2 error", 0) == 0);
}

TEST_CASE("backward oracle: dQ's max abs error is judged against each element's own terms",
          "[oracle][backward]") {
  // Under a causal mask with near-equal keys the first rows see a few keys whose dS K terms are
  // of order 1 and cancel; row 0 sees key 0 alone, its dS is 0 and so are its terms. One element
  // of row 0 off by 1.5 times the limit the gradient's largest element sets fails, as it did
  // before the terms were taken into account: the terms of other rows raise only their own limits
  // (a limit raised by the largest terms of the gradient let such an error pass).
  Shape s;
  s.seq_q = 128, s.seq_kv = 128, s.d_k = 32, s.d_v = 256, s.pass = Pass::bwd;
  s.dtype = DType::bf16;
  s.set_mask(MaskSpec::causal());
  const HostTensors in = make_inputs(s, Distribution::near_constant, 9);
  const double scale = 1 / std::sqrt(32.0);
  const Gradients<double> r = reference_gradients(in, scale);
  Gradients<float> got = as_float(r);
  OracleReport report = check_gradients(in, scale, got, {}, Precision::fp32, OracleOptions{});
  REQUIRE(report.passed);
  double largest = 0;
  for (const double x : r.dq) largest = std::max(largest, std::abs(x));
  const Tolerance tolerance =
      gradient_tolerance(DType::bf16, Precision::fp32, report.max_abs_score);
  got.dq[3] += static_cast<float>(1.5 * tolerance.max_abs * std::max(1.0, largest));
  report = check_gradients(in, scale, got, {}, Precision::fp32, OracleOptions{});
  INFO(report.failure);
  CHECK_FALSE(report.passed);
  CHECK(report.failure.rfind("dQ max abs error", 0) == 0);
  CHECK(report.failure.find("row 0, col 3") != std::string::npos);
}

TEST_CASE("backward oracle: sampling compares the rule's rows and keys, and finds NaN",
          "[oracle][backward]") {
  Shape s;
  s.batch = 2, s.heads = 2, s.kv_heads = 1, s.seq_q = 40, s.seq_kv = 40, s.d_k = 8, s.d_v = 8;
  s.pass = Pass::bwd;
  const HostTensors in = make_inputs(s, Distribution::normal, 11);
  const Gradients<double> r = reference_gradients(in, 0.35);
  OracleOptions sampling;
  sampling.full_check_max_n = 16;
  sampling.sample_rows = 4;
  OracleReport report = check_gradients(in, 0.35, as_float(r), {}, Precision::fp32, sampling);
  CHECK(report.passed);
  CHECK(report.sampled);
  // An unwritten dQ in the last row of (1, 1): every head's last row is compared.
  Gradients<float> got = as_float(r);
  got.dq[((1 * 2 + 1) * 40 + 39) * 8 + 3] = std::nanf("");
  report = check_gradients(in, 0.35, got, {}, Precision::fp32, sampling);
  CHECK_FALSE(report.passed);
  CHECK(report.failure.find("dQ is NaN") == 0);
  // The first key of key head (0, 0) is always compared; a key in no sampled head is not.
  got = as_float(r);
  got.dk[5] += 1.0f;
  CHECK_FALSE(check_gradients(in, 0.35, got, {}, Precision::fp32, sampling).passed);
}

}  // namespace
}  // namespace attnbench
