#include "harness/measure/backward_oracle.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <stdexcept>
#include <tuple>

#include "harness/core/element_types.h"
#include "harness/measure/oracle.h"
#include "harness/variant/parallel_errors.h"

namespace attnbench {

namespace {

// Offsets of a row in the host tensors, which are bhsd (host_tensors.h).
int64_t q_row(const Shape& s, int64_t b, int64_t h, int64_t i) {
  return ((b * s.heads + h) * s.seq_q + i) * s.d_k;
}
int64_t o_row(const Shape& s, int64_t b, int64_t h, int64_t i) {
  return ((b * s.heads + h) * s.seq_q + i) * s.d_v;
}
int64_t k_head(const Shape& s, int64_t b, int64_t g) { return (b * s.kv_heads + g) * s.seq_kv; }

// Where one query row's part of the gradients is added: each gradient, and the sum of the squares
// of the terms it sums (what a rounding per term can move it by; see GradientComparison). Any may
// be null.
struct GradientSums {
  double* dq = nullptr;
  double* dk = nullptr;
  double* dv = nullptr;
  double* dq_terms = nullptr;
  double* dk_terms = nullptr;
  double* dv_terms = nullptr;
};

// term(c) for c < count into sum[at + c], and its square into terms[at + c], where not null.
template <class Term>
void add_term(double* sum, double* terms, int64_t at, int64_t count, Term term) {
  if (sum == nullptr && terms == nullptr) return;
  for (int64_t c = 0; c < count; ++c) {
    const double value = term(c);
    if (sum != nullptr) sum[at + c] += value;
    if (terms != nullptr) terms[at + c] += value * value;
  }
}

// O's row (b, h, i) as a backward reads it, stored in the dtype: the variant's (`stored_o`, bhsd)
// where it is finite and within the forward's max-abs tolerance of the reference row `o`, else
// `o` rounded to the dtype.
std::vector<double> stored_o_row(const Shape& s, const std::vector<double>& o,
                                 const float* stored_o, int64_t b, int64_t h, int64_t i) {
  std::vector<double> row(o.size());
  for (std::size_t c = 0; c < o.size(); ++c)
    row[c] = s.dtype == DType::fp32 ? o[c] : round_to(s.dtype, static_cast<float>(o[c]));
  if (stored_o == nullptr) return row;
  const float* variant_row = stored_o + o_row(s, b, h, i);
  double largest = 1;
  for (double value : o) largest = std::max(largest, std::abs(value));
  const double limit = tolerance_for(s.dtype).max_abs * largest;
  for (std::size_t c = 0; c < o.size(); ++c)
    if (!std::isfinite(variant_row[c]) || std::abs(variant_row[c] - o[c]) > limit) return row;
  return std::vector<double>(variant_row, variant_row + o.size());
}

// One query row's part of the gradients, in float64, written as the equations read:
//   P = softmax(S) (the forward oracle's row), D = dO_i . O_i (O as the backward reads it),
//   dP_ij = dO_i . V_j, dS_ij = P_ij (dP_ij - D) * dcap_ij,
//   dQ_i += scale sum_j dS_ij K_j, dK_j += scale dS_ij Q_i, dV_j += P_ij dO_i,
// where dcap = 1 - tanh^2(raw / softcap) is soft-capping's derivative (1 without it) and ALiBi,
// a constant bias, adds no term. `sums.dq` (d_k values), `sums.dk` and `sums.dv` (the key head's
// seq_kv rows) and their terms' squares are added to. `stored_o`: the O the variant's backward
// read (bhsd, fp32 values of the dtype; stored_o_row says which rows D takes), or null for the
// reference's own O rounded to the dtype.
// Cost O(seq_kv * (d_k + d_v)).
void backward_row(const HostTensors& in, double scale, int64_t b, int64_t h, int64_t i,
                  const float* stored_o, const GradientSums& sums, double& max_abs_score) {
  const Shape& s = in.shape;
  std::vector<double> o, p;
  double row_score = 0;
  reference_row(in, scale, b, h, i, o, &p, &row_score);
  max_abs_score = std::max(max_abs_score, row_score);
  const float* q = &in.q[q_row(s, b, h, i)];
  const float* dout = &in.dout[o_row(s, b, h, i)];
  const int64_t key0 = k_head(s, b, h / s.group_size());
  const float* k = &in.k[key0 * s.d_k];
  const float* v = &in.v[key0 * s.d_v];
  // D keeps each row of dS summing to zero, as the weights sum to one. It reads O stored in the
  // dtype, and where the variant's own O row is within the forward's tolerance of the reference
  // (every element finite and within tolerance_for's max abs), that row: where dP_ij - D nearly
  // cancels (one key dominates, or a short d_v) an ulp of the dtype in O, its rounding or the
  // forward's own error (P rounded to bf16 before P V), would otherwise dominate dS, and that is
  // the forward's to answer for. A row further off (one the forward's sampled check may not have
  // read) is not taken: a backward that read it is charged through D, as it must be.
  const std::vector<double> stored = stored_o_row(s, o, stored_o, b, h, i);
  double d_term = 0;
  for (int64_t c = 0; c < s.d_v; ++c) d_term += static_cast<double>(dout[c]) * stored[c];
  for (int64_t j = 0; j < s.seq_kv; ++j) {
    if (p[j] == 0) continue;  // a masked key has no weight and gets no gradient from this row
    double dp = 0;
    for (int64_t c = 0; c < s.d_v; ++c) dp += static_cast<double>(dout[c]) * v[j * s.d_v + c];
    double ds = p[j] * (dp - d_term);
    if (s.softcap > 0) {
      double raw = 0;
      for (int64_t c = 0; c < s.d_k; ++c) raw += static_cast<double>(q[c]) * k[j * s.d_k + c];
      const double t = std::tanh(scale * raw / s.softcap);
      ds *= 1 - t * t;
    }
    add_term(sums.dq, sums.dq_terms, 0, s.d_k,
             [&](int64_t c) { return scale * ds * k[j * s.d_k + c]; });
    add_term(sums.dk, sums.dk_terms, j * s.d_k, s.d_k,
             [&](int64_t c) { return scale * ds * q[c]; });
    add_term(sums.dv, sums.dv_terms, j * s.d_v, s.d_v, [&](int64_t c) { return p[j] * dout[c]; });
  }
}

// dK and dV of key head (b, g), summed over its group of query heads and all their rows: the
// query rows run in parallel, each thread adding into its own copy. Cost O(group * seq_q *
// seq_kv * d).
// With `terms`, also the sums of their terms' squares (dk_terms, dv_terms).
struct KeyHeadGradients {
  std::vector<double> dk, dv, dk_terms, dv_terms;
};
void key_head_gradients(const HostTensors& in, double scale, int64_t b, int64_t g,
                        const float* stored_o, bool terms, KeyHeadGradients& out,
                        double& max_abs_score) {
  const Shape& s = in.shape;
  const auto dk_size = static_cast<std::size_t>(s.seq_kv * s.d_k);
  const auto dv_size = static_cast<std::size_t>(s.seq_kv * s.d_v);
  out.dk.assign(dk_size, 0.0);
  out.dv.assign(dv_size, 0.0);
  out.dk_terms.assign(terms ? dk_size : 0, 0.0);
  out.dv_terms.assign(terms ? dv_size : 0, 0.0);
  const int64_t rows = s.group_size() * s.seq_q;
  double largest = 0;
  // What a thread cannot allocate is thrown after the region (thrown out of it, it ended the
  // process); once one has thrown, the rest of the work is skipped (ParallelErrors::capture).
  ParallelErrors errors;
#pragma omp parallel reduction(max : largest)
  {
    KeyHeadGradients mine;
    GradientSums sums;
    errors.capture([&] {
      mine = {std::vector<double>(dk_size, 0.0), std::vector<double>(dv_size, 0.0),
              std::vector<double>(out.dk_terms.size(), 0.0),
              std::vector<double>(out.dv_terms.size(), 0.0)};
      sums.dk = mine.dk.data();
      sums.dv = mine.dv.data();
      sums.dk_terms = terms ? mine.dk_terms.data() : nullptr;
      sums.dv_terms = terms ? mine.dv_terms.data() : nullptr;
    });
#pragma omp for schedule(dynamic, 8)
    for (int64_t r = 0; r < rows; ++r) {
      errors.capture([&] {
        const int64_t h = g * s.group_size() + r / s.seq_q;
        backward_row(in, scale, b, h, r % s.seq_q, stored_o, sums, largest);
      });
    }
#pragma omp critical
    errors.capture([&] {
      for (std::size_t x = 0; x < dk_size; ++x) out.dk[x] += mine.dk[x];
      for (std::size_t x = 0; x < dv_size; ++x) out.dv[x] += mine.dv[x];
      for (std::size_t x = 0; x < out.dk_terms.size(); ++x) out.dk_terms[x] += mine.dk_terms[x];
      for (std::size_t x = 0; x < out.dv_terms.size(); ++x) out.dv_terms[x] += mine.dv_terms[x];
    });
  }
  errors.rethrow_first();
  max_abs_score = std::max(max_abs_score, largest);
}

// A (batch, head, row) place: a query row of dQ, or a key of dK/dV with head the key head.
using Place = std::tuple<int64_t, int64_t, int64_t>;

// The sampling rule, for shapes past options.full_check_max_n (the forward's threshold):
//  - dQ: the forward's rows, the first and last query row of every (batch, head) plus
//    options.sample_rows seeded random (batch, head, row) triples: O(seq_kv * d) each;
//  - dK, dV: a key needs every query row of its group (each row's normaliser), so whole key heads
//    are computed: (0, 0), (batch - 1, kv_heads - 1) and one seeded random (batch, kv head), at
//    O(group * seq_q * seq_kv * d) each; in each, the first and last key plus
//    options.sample_rows seeded random keys are compared.
// Below the threshold every row and key is compared.
struct SamplePlan {
  std::vector<Place> dq_rows;
  std::vector<std::pair<int64_t, int64_t>> key_heads;
  std::vector<int64_t> keys;  // compared in every key head
  bool sampled = false;
};

SamplePlan plan_samples(const Shape& s, const OracleOptions& options) {
  SamplePlan plan;
  plan.sampled = std::max(s.seq_q, s.seq_kv) > options.full_check_max_n;
  std::mt19937_64 rng(options.sample_seed);
  std::set<Place> rows;
  std::set<std::pair<int64_t, int64_t>> heads;
  std::set<int64_t> keys;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.seq_q; ++i)
        if (!plan.sampled || i == 0 || i == s.seq_q - 1) rows.insert({b, h, i});
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t g = 0; g < s.kv_heads; ++g)
      if (!plan.sampled) heads.insert({b, g});
  for (int64_t j = 0; j < s.seq_kv; ++j)
    if (!plan.sampled || j == 0 || j == s.seq_kv - 1) keys.insert(j);
  if (plan.sampled) {
    std::uniform_int_distribution<int64_t> batch(0, s.batch - 1), head(0, s.heads - 1),
        row(0, s.seq_q - 1), kv_head(0, s.kv_heads - 1), key(0, s.seq_kv - 1);
    for (int64_t n = 0; n < options.sample_rows; ++n)
      rows.insert({batch(rng), head(rng), row(rng)});
    heads.insert({0, 0});
    heads.insert({s.batch - 1, s.kv_heads - 1});
    heads.insert({batch(rng), kv_head(rng)});
    for (int64_t n = 0; n < options.sample_rows; ++n) keys.insert(key(rng));
  }
  plan.dq_rows.assign(rows.begin(), rows.end());
  plan.key_heads.assign(heads.begin(), heads.end());
  plan.keys.assign(keys.begin(), keys.end());
  return plan;
}

// The comparison of one gradient: sums for the relative L2 error, the worst element against its
// max-abs limit, and the first non-finite element (which fails the check outright).
//
// The max-abs limit of an element is the tolerance times its scale: the largest of 1 and the
// gradient's largest reference element (as the forward's), and, where the gradient's references
// are all known before its elements are added (dQ: set_scale_floor), the element's own terms (the
// root of their squares), by the same reasoning as rel_l2's. A bf16 dQ element with d_k = 1 under
// near_constant keys sums six dS K terms of ~5 to 0.12: dS's rounding moved it by 0.066 where the
// limit read against 0.12 was 0.063. Each element's own terms, not the gradient's largest: a
// wrong row of small terms is still judged as before.
struct GradientComparison {
  explicit GradientComparison(const char* gradient_name) : name(gradient_name) {}
  const char* name;
  double err_sq = 0, ref_sq = 0, terms_sq = 0, ref_max = 0, max_abs_err = 0;
  int64_t compared = 0;
  ElementError worst;  // the largest error
  // With a known floor: the element whose error is largest against its own scale, and both.
  double scale_floor = 0;  // 0: not known before the adds (dK, dV): max(1, ref_max) at the end
  double worst_scaled = 0, worst_scale = 1;
  ElementError worst_against_scale;
  std::string failure;

  // The floor of every element's scale, max(1, the largest |reference|), before any add.
  void set_scale_floor(double largest_reference) { scale_floor = std::max(1.0, largest_reference); }

  // `terms_squared`: the sum of the squares of the terms the reference element sums.
  void add(const Place& at, int64_t column, double got, double reference, double terms_squared) {
    const auto [b, h, row] = at;
    if (!failure.empty()) return;
    if (!std::isfinite(got)) {
      worst = {b, h, row, column, got, reference};
      failure = fmt::format("{} is {} at (batch {}, head {}, row {}, col {}): reference {:.6g}",
                            name, std::isnan(got) ? "NaN (unwritten or invalid)" : "infinite", b, h,
                            row, column, reference);
      return;
    }
    const double diff = got - reference;
    err_sq += diff * diff;
    ref_sq += reference * reference;
    terms_sq += terms_squared;
    ref_max = std::max(ref_max, std::abs(reference));
    if (compared++ == 0 || std::abs(diff) > max_abs_err) {
      max_abs_err = std::abs(diff);
      worst = {b, h, row, column, got, reference};
    }
    if (scale_floor > 0) {
      const double scale = std::max(scale_floor, std::sqrt(terms_squared));
      if (compared == 1 || std::abs(diff) / scale > worst_scaled / worst_scale) {
        worst_scaled = std::abs(diff);
        worst_scale = scale;
        worst_against_scale = {b, h, row, column, got, reference};
      }
    }
  }
  // The element judged by the max-abs check, its error and its scale (the limit over the
  // tolerance).
  const ElementError& abs_checked() const { return scale_floor > 0 ? worst_against_scale : worst; }
  double abs_checked_error() const { return scale_floor > 0 ? worst_scaled : max_abs_err; }
  double abs_checked_scale() const {
    return scale_floor > 0 ? worst_scale : std::max(1.0, ref_max);
  }
  // Relative to the larger of the reference's norm and its terms' (the root of the sum of every
  // term's square), floored at a root mean square of gradient_rms_floor. The terms: a rounding
  // per term (dS, P rounded to the dtype before the products) moves a sum by ~u times the norm of
  // its terms, not of the sum; where the terms cancel (dQ = scale sum_j dS_ij K_j with near-equal
  // keys: the dS of a row sum to zero, so the shared part of the keys cancels) the sum is far
  // smaller than they are, and judging against it would charge the cancellation to the variant.
  // With zero-mean inputs the two norms agree in expectation, so the tolerance is unchanged
  // there. The floor: where one key dominates a row, dQ and dK are ~0 (1e-20) and any rounding
  // would be infinitely relative; there the error is judged against gradients of 1e-2, a
  // hundredth of the inputs'.
  double rel_l2() const {
    const double floor_sq = gradient_rms_floor * gradient_rms_floor *
                            static_cast<double>(std::max<int64_t>(compared, 1));
    return std::sqrt(err_sq / std::max({ref_sq, terms_sq, floor_sq}));
  }
  static constexpr double gradient_rms_floor = 1e-2;
};

void compare_dq(const HostTensors& in, double scale, const float* stored_o, const SamplePlan& plan,
                const std::vector<float>& got, GradientComparison& result, double& max_abs_score) {
  const Shape& s = in.shape;
  std::vector<std::vector<double>> reference(plan.dq_rows.size()), terms(plan.dq_rows.size());
  double largest = 0;
  ParallelErrors errors;  // thrown after the loop, as in key_head_gradients
#pragma omp parallel for schedule(dynamic, 4) reduction(max : largest)
  for (std::size_t r = 0; r < plan.dq_rows.size(); ++r) {
    errors.capture([&] {
      const auto [b, h, i] = plan.dq_rows[r];
      reference[r].assign(static_cast<std::size_t>(s.d_k), 0.0);
      terms[r].assign(static_cast<std::size_t>(s.d_k), 0.0);
      GradientSums sums;
      sums.dq = reference[r].data();
      sums.dq_terms = terms[r].data();
      backward_row(in, scale, b, h, i, stored_o, sums, largest);
    });
  }
  errors.rethrow_first();
  max_abs_score = std::max(max_abs_score, largest);
  double largest_reference = 0;
  for (const std::vector<double>& row : reference)
    for (const double value : row) largest_reference = std::max(largest_reference, std::abs(value));
  result.set_scale_floor(largest_reference);
  for (std::size_t r = 0; r < plan.dq_rows.size(); ++r) {
    const auto [b, h, i] = plan.dq_rows[r];
    for (int64_t c = 0; c < s.d_k; ++c)
      result.add(plan.dq_rows[r], c, got[q_row(s, b, h, i) + c], reference[r][c], terms[r][c]);
  }
}

void compare_dk_dv(const HostTensors& in, double scale, const float* stored_o,
                   const SamplePlan& plan, const Gradients<float>& got,
                   GradientComparison& dk_result, GradientComparison& dv_result,
                   double& max_abs_score) {
  const Shape& s = in.shape;
  KeyHeadGradients r;
  for (const auto& [b, g] : plan.key_heads) {
    key_head_gradients(in, scale, b, g, stored_o, /*terms=*/true, r, max_abs_score);
    for (int64_t j : plan.keys) {
      const Place at{b, g, j};
      const int64_t key = k_head(s, b, g) + j;
      for (int64_t c = 0; c < s.d_k; ++c)
        dk_result.add(at, c, got.dk[key * s.d_k + c], r.dk[j * s.d_k + c],
                      r.dk_terms[j * s.d_k + c]);
      for (int64_t c = 0; c < s.d_v; ++c)
        dv_result.add(at, c, got.dv[key * s.d_v + c], r.dv[j * s.d_v + c],
                      r.dv_terms[j * s.d_v + c]);
    }
  }
}

}  // namespace

Gradients<double> reference_gradients(const HostTensors& in, double scale) {
  const Shape& s = in.shape;
  Gradients<double> out;
  out.dq.assign(static_cast<std::size_t>(s.q_elements()), 0.0);
  out.dk.resize(static_cast<std::size_t>(s.k_elements()));
  out.dv.resize(static_cast<std::size_t>(s.v_elements()));
  double largest = 0;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.seq_q; ++i) {
        GradientSums sums;
        sums.dq = &out.dq[q_row(s, b, h, i)];
        backward_row(in, scale, b, h, i, nullptr, sums, largest);
      }
  KeyHeadGradients r;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t g = 0; g < s.kv_heads; ++g) {
      key_head_gradients(in, scale, b, g, nullptr, /*terms=*/false, r, largest);
      std::copy(r.dk.begin(), r.dk.end(), out.dk.begin() + k_head(s, b, g) * s.d_k);
      std::copy(r.dv.begin(), r.dv.end(), out.dv.begin() + k_head(s, b, g) * s.d_v);
    }
  return out;
}

OracleReport check_gradients(const HostTensors& in, double scale, const Gradients<float>& got,
                             const std::vector<float>& stored_o, Precision precision,
                             const OracleOptions& options) {
  if (!stored_o.empty() && static_cast<int64_t>(stored_o.size()) != in.shape.o_elements())
    throw std::logic_error("check_gradients: the stored O does not have the shape's elements");
  const float* o = stored_o.empty() ? nullptr : stored_o.data();
  const SamplePlan plan = plan_samples(in.shape, options);
  OracleReport report;
  report.sampled = plan.sampled;
  GradientComparison dq{"dQ"}, dk{"dK"}, dv{"dV"};
  compare_dq(in, scale, o, plan, got.dq, dq, report.max_abs_score);
  compare_dk_dv(in, scale, o, plan, got, dk, dv, report.max_abs_score);
  report.rows_checked =
      static_cast<int64_t>(plan.dq_rows.size() + 2 * plan.key_heads.size() * plan.keys.size());
  const Tolerance tolerance = gradient_tolerance(in.shape.dtype, precision, report.max_abs_score);
  report.rel_l2_tolerance = tolerance.rel_l2;
  // The report carries the gradient worst against its tolerance; the first failing one fails it.
  double worst_ratio = -1;
  for (const GradientComparison* gradient : {&dq, &dk, &dv}) {
    const double abs_limit = tolerance.max_abs * gradient->abs_checked_scale();
    const double ratio =
        std::max(gradient->rel_l2() / tolerance.rel_l2, gradient->abs_checked_error() / abs_limit);
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      report.rel_l2_err = gradient->rel_l2();
      report.max_abs_err = gradient->max_abs_err;
      report.worst_output = gradient->worst;
    }
    if (!report.failure.empty()) continue;
    const auto where = [](const ElementError& at) {
      return fmt::format("at (batch {}, head {}, row {}, col {}): got {:.6g}, reference {:.6g}",
                         at.batch, at.head, at.row, at.column, at.got, at.reference);
    };
    if (!gradient->failure.empty()) {
      report.failure = gradient->failure;
    } else if (gradient->rel_l2() > tolerance.rel_l2) {
      report.failure = fmt::format(
          "{} relative L2 error {:.3g} exceeds the tolerance {:.3g}; "
          "largest error {:.3g} {}",
          gradient->name, gradient->rel_l2(), tolerance.rel_l2, gradient->max_abs_err,
          where(gradient->worst));
    } else if (gradient->abs_checked_error() > abs_limit) {
      report.failure =
          fmt::format("{} max abs error {:.3g} exceeds the tolerance {:.3g} {}", gradient->name,
                      gradient->abs_checked_error(), abs_limit, where(gradient->abs_checked()));
    }
  }
  report.passed = report.failure.empty();
  return report;
}

}  // namespace attnbench
