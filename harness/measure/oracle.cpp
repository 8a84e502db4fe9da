#include "harness/measure/oracle.h"

#include <fmt/format.h>
#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>

#include "harness/core/pass.h"
#include "harness/core/tensor.h"
#include "harness/variant/kv_rows.h"
#include "harness/variant/parallel_errors.h"

namespace attnbench {

namespace {

using RowMajorFloats = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstFloatsMap = Eigen::Map<const RowMajorFloats, Eigen::Unaligned, Eigen::OuterStride<>>;

struct RowIndex {
  int64_t batch, head, row;
  bool operator<(const RowIndex& other) const {
    return std::tie(batch, head, row) < std::tie(other.batch, other.head, other.row);
  }
  bool operator==(const RowIndex& other) const {
    return std::tie(batch, head, row) == std::tie(other.batch, other.head, other.row);
  }
};

// The rows to compare: all of them for small shapes. Otherwise the first and last row of every
// (batch, head), where masks and tile edges go wrong and where a variant that breaks one head
// shows, plus options.sample_rows seeded random (batch, head, row) triples on top; a triple drawn
// twice is compared once. That is at most 2 * batch * heads + sample_rows rows of O(seq_kv * d)
// each: under 2 / full_check_max_n of the attention's own work, plus the random rows.
std::vector<RowIndex> rows_to_check(const Shape& s, const OracleOptions& options, bool& sampled) {
  std::vector<RowIndex> rows;
  sampled = std::max(s.seq_q, s.seq_kv) > options.full_check_max_n;
  if (!sampled) {
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.heads; ++h)
        for (int64_t i = 0; i < s.seq_q; ++i) rows.push_back({b, h, i});
    return rows;
  }
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      rows.push_back({b, h, 0});
      rows.push_back({b, h, s.seq_q - 1});
    }
  std::mt19937_64 rng(options.sample_seed);
  std::uniform_int_distribution<int64_t> batch(0, s.batch - 1), head(0, s.heads - 1),
      row(0, s.seq_q - 1);
  for (int64_t i = 0; i < options.sample_rows; ++i)
    rows.push_back({batch(rng), head(rng), row(rng)});
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

// The views of the host inputs, which are fp32 values in bhsd order (host_tensors.h); K and V
// are page pools when the shape is paged.
AttentionViews host_views(const HostTensors& in) {
  Shape bhsd = in.shape;
  bhsd.dtype = DType::fp32;
  bhsd.layout = Layout::bhsd;
  bhsd.kv_dtype = KvDType::case_dtype;  // a quantized cache's K and V are held dequantized
  return make_views(bhsd, in.q.data(), in.k.data(), in.v.data(), nullptr);
}

// The K (or V) rows of `keys` of (b, kv_head) as a matrix. Contiguous: a map of the host tensor,
// no copy. Paged: the rows gathered through the block table into `gathered`, one row at a time,
// O(keys * dim) like the products that read them.
ConstFloatsMap key_rows(const HostTensors& in, const TensorView& view, int64_t b, int64_t kv_head,
                        const KeyRange& keys, int64_t dim, RowMajorFloats& gathered) {
  if (!in.shape.kv_cache.is_paged()) {
    return ConstFloatsMap(view.row<const float>(b, kv_head, 0) + keys.first * view.row_stride,
                          keys.size(), dim, Eigen::OuterStride<>(view.row_stride));
  }
  const KvPageTable pages = page_table_of(in.shape, in.block_table.data());
  gathered.resize(keys.size(), dim);
  for (int64_t j = 0; j < keys.size(); ++j) {
    const float* row = kv_row<const float>(view, pages, b, kv_head, keys.first + j);
    std::copy(row, row + dim, gathered.row(j).data());
  }
  return ConstFloatsMap(gathered.data(), keys.size(), dim, Eigen::OuterStride<>(dim));
}

// The mask of every sequence: one per sequence in a ragged batch (each aligned to its own end),
// else the one all share.
std::vector<MaskGeometry> sequence_masks(const Shape& s) {
  std::vector<MaskGeometry> masks;
  if (s.kv_lens.empty()) {
    masks.push_back(s.mask_geometry());
  } else {
    for (int64_t b = 0; b < s.batch; ++b) masks.push_back(s.mask_geometry_of(b));
  }
  return masks;
}

const MaskGeometry& mask_of(const std::vector<MaskGeometry>& masks, int64_t b) {
  return masks.size() == 1 ? masks.front() : masks[static_cast<std::size_t>(b)];
}

// Keys whose score is this far below the row's largest carry a weight below e^-40 of the largest:
// their scores' rounding cannot move the output, so they do not condition the tolerance.
constexpr double weightless_score_gap = 40;

using RowMajorDoubles = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Keys a row's products take at a time, widened to float64: about 1 MiB of K or V, so the scratch
// stays O(d) a thread however long the row (the whole row widened at once held 2 GiB a thread at
// 1M keys of d 128).
int64_t keys_per_block(int64_t dim) {
  constexpr int64_t block_bytes = int64_t{1} << 20;
  return std::max<int64_t>(1, block_bytes / (std::max<int64_t>(1, dim) * sizeof(double)));
}

// The K (or V) rows of `keys` of (b, kv_head), widened to float64 into `block`.
void widened_rows(const HostTensors& in, const TensorView& view, int64_t b, int64_t kv_head,
                  const KeyRange& keys, int64_t dim, RowMajorDoubles& block) {
  RowMajorFloats gathered;
  block = key_rows(in, view, b, kv_head, keys, dim, gathered).cast<double>();
}

// One reference row, with the problem's mask geometry built once by the caller. `terms_sq`, where
// given: for each column c of O, the sum of the squares of the terms p_j v_jc it sums. The keys
// are taken a block at a time (keys_per_block).
void reference_row(const HostTensors& in, const MaskGeometry& mask, double scale, int64_t b,
                   int64_t h, int64_t row, std::vector<double>& o, std::vector<double>* weights,
                   double* max_abs_score, std::vector<double>* terms_sq = nullptr) {
  const Shape& s = in.shape;
  const AttentionViews views = host_views(in);
  const ConstFloatsMap q(views.q.row<const float>(b, h, row), 1, s.d_k,
                         Eigen::OuterStride<>(views.q.row_stride));
  const Eigen::VectorXd query = q.cast<double>().transpose();
  // Only the keys the mask leaves in are scored; every other key's weight is exactly 0. In a
  // ragged batch the mask is the sequence's own, so no key past its length is among them.
  const KeyRange keys = mask.keys(row);
  const int64_t kv_head = h / s.group_size();
  RowMajorDoubles block;

  Eigen::VectorXd raw_scores(keys.size());
  const int64_t k_block = keys_per_block(s.d_k);
  for (int64_t j = 0; j < keys.size(); j += k_block) {
    const int64_t count = std::min(k_block, keys.size() - j);
    widened_rows(in, views.k, b, kv_head, {keys.first + j, keys.first + j + count}, s.d_k, block);
    raw_scores.segment(j, count).noalias() = scale * (block * query);
  }
  // The modifiers, in mask.h's order: soft-cap the scaled score, then add the ALiBi bias.
  Eigen::VectorXd scores = raw_scores;
  if (s.softcap > 0) scores = s.softcap * (scores.array() / s.softcap).tanh();
  if (s.alibi) {
    const double slope = alibi_slope(h, s.heads);
    for (int64_t j = 0; j < keys.size(); ++j)
      scores[j] -= slope * std::abs(static_cast<double>(mask.position(row) - (keys.first + j)));
  }
  const double max_score = scores.maxCoeff();
  const Eigen::VectorXd exps = (scores.array() - max_score).exp();
  const Eigen::VectorXd p = exps / exps.sum();
  Eigen::VectorXd out = Eigen::VectorXd::Zero(s.d_v);
  Eigen::VectorXd squares = Eigen::VectorXd::Zero(terms_sq != nullptr ? s.d_v : 0);
  const int64_t v_block = keys_per_block(s.d_v);
  for (int64_t j = 0; j < keys.size(); j += v_block) {
    const int64_t count = std::min(v_block, keys.size() - j);
    widened_rows(in, views.v, b, kv_head, {keys.first + j, keys.first + j + count}, s.d_v, block);
    out.noalias() += block.transpose() * p.segment(j, count);
    if (terms_sq != nullptr) {
      squares.noalias() += block.array().square().matrix().transpose() *
                           p.segment(j, count).array().square().matrix();
    }
  }

  o.assign(out.data(), out.data() + out.size());
  if (terms_sq != nullptr) terms_sq->assign(squares.data(), squares.data() + squares.size());
  if (max_abs_score != nullptr) {
    // fp32 rounds a score s by about eps |s|: the raw scores (as before any modifier) and the
    // final scores of the keys that carry weight are the ones whose rounding shows in the output.
    double largest = raw_scores.cwiseAbs().maxCoeff();
    for (int64_t j = 0; j < keys.size(); ++j) {
      if (scores[j] >= max_score - weightless_score_gap)
        largest = std::max(largest, std::abs(scores[j]));
    }
    *max_abs_score = largest;
  }
  if (weights != nullptr) {
    weights->assign(static_cast<std::size_t>(s.seq_kv), 0.0);
    std::copy(p.data(), p.data() + p.size(), weights->begin() + keys.first);
  }
}

}  // namespace

void reference_row(const HostTensors& in, double scale, int64_t b, int64_t h, int64_t row,
                   std::vector<double>& o, std::vector<double>* weights, double* max_abs_score) {
  reference_row(in, in.shape.mask_geometry_of(b), scale, b, h, row, o, weights, max_abs_score);
}

std::vector<double> reference_output(const HostTensors& in, double scale,
                                     std::vector<double>* weights) {
  const Shape& s = in.shape;
  const std::vector<MaskGeometry> masks = sequence_masks(s);
  std::vector<double> out(static_cast<std::size_t>(s.o_elements()));
  if (weights != nullptr) weights->assign(static_cast<std::size_t>(s.weight_elements()), 0.0);
  std::vector<double> o_row, w_row;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.seq_q; ++i) {
        reference_row(in, mask_of(masks, b), scale, b, h, i, o_row, weights ? &w_row : nullptr,
                      nullptr);
        const int64_t flat = (b * s.heads + h) * s.seq_q + i;
        std::copy(o_row.begin(), o_row.end(), out.begin() + flat * s.d_v);
        if (weights) std::copy(w_row.begin(), w_row.end(), weights->begin() + flat * s.seq_kv);
      }
  return out;
}

namespace {

// "bf16", "fp32" or "tf32": which row of the tolerance table applied.
const char* tolerance_name(DType dtype, Precision precision) {
  return dtype == DType::fp32 && precision == Precision::tf32 ? "tf32" : to_string(dtype);
}

// "(batch 0, head 1, row 2, col 3)": where an element is; `column` names the last index ("col"
// for O, "key" for the weights).
std::string location(const ElementError& at, const char* column) {
  return fmt::format("(batch {}, head {}, row {}, {} {})", at.batch, at.head, at.row, column,
                     at.column);
}

// "at (batch 0, ...): got 1.5, reference 0.25": an element and its two values.
std::string element_values(const ElementError& at, const char* column) {
  return fmt::format("at {}: got {:.6g}, reference {:.6g}", location(at, column), at.got,
                     at.reference);
}

// One checked row's contribution to the report; `failure` is set for a hard failure (a
// non-finite value, a masked weight that is not 0), which ends the check at the first such row.
struct RowComparison {
  double err_sq = 0, ref_sq = 0, terms_sq = 0, ref_max = 0, max_abs_err = 0, max_abs_score = 0;
  double weights_max_abs_err = 0, weights_row_sum_err = 0;
  ElementError worst_output, worst_weight;  // the elements of max_abs_err and weights_max_abs_err
  std::string failure;
};

RowComparison compare_row(const HostTensors& in, const MaskGeometry& mask, double scale,
                          const RowIndex& r, const std::vector<float>& o,
                          const std::vector<float>* weights) {
  const Shape& s = in.shape;
  RowComparison result;
  std::vector<double> o_ref, w_ref, terms_sq;
  reference_row(in, mask, scale, r.batch, r.head, r.row, o_ref, weights ? &w_ref : nullptr,
                &result.max_abs_score, &terms_sq);
  const int64_t flat = (r.batch * s.heads + r.head) * s.seq_q + r.row;
  result.worst_output = {r.batch, r.head, r.row, 0, o[flat * s.d_v], o_ref[0]};
  for (int64_t c = 0; c < s.d_v; ++c) {
    const double got = o[flat * s.d_v + c];
    if (!std::isfinite(got)) {
      result.worst_output = {r.batch, r.head, r.row, c, got, o_ref[c]};
      result.failure = fmt::format("output is {} {}",
                                   std::isnan(got) ? "NaN (unwritten or invalid)" : "infinite",
                                   element_values(result.worst_output, "col"));
      return result;
    }
    const double diff = got - o_ref[c];
    result.err_sq += diff * diff;
    result.ref_sq += o_ref[c] * o_ref[c];
    result.terms_sq += terms_sq[c];
    result.ref_max = std::max(result.ref_max, std::abs(o_ref[c]));
    if (std::abs(diff) > result.max_abs_err) {
      result.max_abs_err = std::abs(diff);
      result.worst_output = {r.batch, r.head, r.row, c, got, o_ref[c]};
    }
  }
  if (weights == nullptr) return result;
  double row_sum = 0;
  const KeyRange visible = mask.keys(r.row);
  result.worst_weight = {r.batch, r.head, r.row, 0, (*weights)[flat * s.seq_kv], w_ref[0]};
  for (int64_t j = 0; j < s.seq_kv; ++j) {
    const double got = (*weights)[flat * s.seq_kv + j];
    const ElementError here{r.batch, r.head, r.row, j, got, w_ref[j]};
    if (!std::isfinite(got)) {
      result.failure = fmt::format("weight is not finite {}", element_values(here, "key"));
      return result;
    }
    if ((j < visible.first || j >= visible.last) && got != 0.0) {
      result.failure = fmt::format("masked weight is {} (not 0) at {}", got, location(here, "key"));
      return result;
    }
    row_sum += got;
    if (std::abs(got - w_ref[j]) > result.weights_max_abs_err) {
      result.weights_max_abs_err = std::abs(got - w_ref[j]);
      result.worst_weight = here;
    }
  }
  result.weights_row_sum_err = std::abs(row_sum - 1);
  return result;
}

}  // namespace

double kv_quant_error(const HostTensors& in, double scale, const OracleOptions& options) {
  HostTensors exact;
  exact.shape = in.shape;
  exact.q = in.q;
  exact.k = in.quantized.k_exact;
  exact.v = in.quantized.v_exact;
  exact.block_table = in.block_table;
  bool sampled = false;
  const auto rows = rows_to_check(in.shape, options, sampled);
  const std::vector<MaskGeometry> masks = sequence_masks(in.shape);
  // Per row, then summed in row order: the same error on every run, whatever the threads did.
  std::vector<double> row_err_sq(rows.size()), row_ref_sq(rows.size());
  ParallelErrors errors;  // a row's scratch that cannot be allocated: thrown after the loop
#pragma omp parallel for schedule(dynamic, 16)
  for (std::size_t i = 0; i < rows.size(); ++i) {
    errors.capture([&] {
      const RowIndex& r = rows[i];
      std::vector<double> quantized, reference;
      const MaskGeometry& mask = mask_of(masks, r.batch);
      reference_row(in, mask, scale, r.batch, r.head, r.row, quantized, nullptr, nullptr);
      reference_row(exact, mask, scale, r.batch, r.head, r.row, reference, nullptr, nullptr);
      for (std::size_t c = 0; c < reference.size(); ++c) {
        row_err_sq[i] += (quantized[c] - reference[c]) * (quantized[c] - reference[c]);
        row_ref_sq[i] += reference[c] * reference[c];
      }
    });
  }
  errors.rethrow_first();
  double err_sq = 0, ref_sq = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    err_sq += row_err_sq[i];
    ref_sq += row_ref_sq[i];
  }
  return ref_sq > 0 ? std::sqrt(err_sq / ref_sq) : std::sqrt(err_sq);
}

double oracle_scratch_bytes(const Shape& s) {
  const auto keys = static_cast<double>(s.seq_kv);
  const auto dims = static_cast<double>(s.d_k + s.d_v);
  // A block of keys widened (keys_per_block: 1 MiB, or one key's row where that is larger) and
  // its fp32 rows, and the row's scores, weights and output in float64.
  const double widest = static_cast<double>(std::max(s.d_k, s.d_v));
  const double block = std::max(double{1 << 20}, widest * sizeof(double)) * 1.5;
  const double row = block + (5 * keys + 3 * static_cast<double>(s.d_v)) * sizeof(double);
  const double key_head = needs_backward(s.pass) ? 2 * keys * dims * sizeof(double) : 0;
  // No more threads hold a row's scratch than there are rows.
  const double threads = std::min(static_cast<double>(std::max(1, omp_get_max_threads())),
                                  static_cast<double>(s.batch * s.heads * s.seq_q));
  return threads * (row + key_head);
}

OracleReport check_against_reference(const HostTensors& in, double scale,
                                     const std::vector<float>& o, const std::vector<float>* weights,
                                     Precision precision, const OracleOptions& options) {
  OracleReport report;
  const auto rows = rows_to_check(in.shape, options, report.sampled);
  const DType dtype = in.shape.dtype;
  const double row_sum_tolerance = weights_row_sum_tolerance(dtype, precision);

  // Rows are independent: compare them in parallel, then combine in row order so the first
  // failing row is reported whatever the thread count.
  const std::vector<MaskGeometry> masks = sequence_masks(in.shape);
  std::vector<RowComparison> compared(rows.size());
  // A row's scratch that cannot be allocated (bad_alloc) is thrown after the loop, where the
  // harness fails the case: thrown out of the OpenMP region it ended the process.
  ParallelErrors errors;
#pragma omp parallel for schedule(dynamic, 16)
  for (std::size_t i = 0; i < rows.size(); ++i) {
    errors.capture([&] {
      compared[i] = compare_row(in, mask_of(masks, rows[i].batch), scale, rows[i], o, weights);
    });
  }
  errors.rethrow_first();

  double err_sq = 0, ref_sq = 0, terms_sq = 0, ref_max = 0;
  ElementError worst_weight;
  RowIndex worst_row_sum{0, 0, 0};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const RowComparison& row = compared[i];
    if (!row.failure.empty()) {
      report.worst_output = row.worst_output;
      report.failure = row.failure;
      return report;
    }
    err_sq += row.err_sq;
    ref_sq += row.ref_sq;
    terms_sq += row.terms_sq;
    ref_max = std::max(ref_max, row.ref_max);
    // Strictly larger: the first of equal errors, in row order, is the one reported.
    if (i == 0 || row.max_abs_err > report.max_abs_err) {
      report.max_abs_err = row.max_abs_err;
      report.worst_output = row.worst_output;
    }
    if (i == 0 || row.weights_max_abs_err > report.weights_max_abs_err) {
      report.weights_max_abs_err = row.weights_max_abs_err;
      worst_weight = row.worst_weight;
    }
    if (i == 0 || row.weights_row_sum_err > report.weights_max_row_sum_err) {
      report.weights_max_row_sum_err = row.weights_row_sum_err;
      worst_row_sum = rows[i];
    }
    report.max_abs_score = std::max(report.max_abs_score, row.max_abs_score);
    ++report.rows_checked;
  }
  // Relative to the larger of O's norm and its terms' (the root of every p_j v_jc's square, as
  // the backward oracle judges its gradients): float32 rounds the sum of P V by about u times its
  // terms, so where they cancel (a few keys of opposite values, a short d_v: an O of 1e-4 from
  // terms of 0.3) judging against the sum would charge the cancellation to the variant, naive
  // included. With zero-mean V the two norms agree in expectation, so the tolerance is
  // unchanged there.
  const double norm_sq = std::max(ref_sq, terms_sq);
  report.rel_l2_err = norm_sq > 0 ? std::sqrt(err_sq / norm_sq) : std::sqrt(err_sq);
  const double conditioning = score_conditioning_factor(report.max_abs_score);
  const Tolerance tolerance =
      conditioned_tolerance(dtype, precision, report.max_abs_score, in.shape.seq_kv);
  report.rel_l2_tolerance = tolerance.rel_l2;

  // Every failure says where its worst element is, so a broken row, head or tile edge can be
  // found without rerunning.
  const double abs_limit = tolerance.max_abs * std::max(1.0, ref_max);
  const std::string worst_output =
      fmt::format("largest error {:.3g} (abs tolerance {:.3g}) {}", report.max_abs_err, abs_limit,
                  element_values(report.worst_output, "col"));
  if (report.rel_l2_err > tolerance.rel_l2) {
    report.failure = fmt::format(
        "relative L2 error {:.3g} exceeds the {} tolerance {:.3g}{}{}; {}", report.rel_l2_err,
        tolerance_name(dtype, precision), tolerance.rel_l2,
        conditioning > 1 ? fmt::format(" (scaled for scores up to {:.0f})", report.max_abs_score)
                         : "",
        row_length_factor(in.shape.seq_kv) > 1
            ? fmt::format(" (grown for rows of {} keys)", in.shape.seq_kv)
            : "",
        worst_output);
  } else if (report.max_abs_err > abs_limit) {
    report.failure = fmt::format("max abs error {:.3g} exceeds the {} tolerance {:.3g} {}",
                                 report.max_abs_err, tolerance_name(dtype, precision), abs_limit,
                                 element_values(report.worst_output, "col"));
  } else if (weights != nullptr && report.weights_max_row_sum_err > row_sum_tolerance) {
    report.failure = fmt::format(
        "a weights row sums to 1 {:+.3g} (tolerance {:.3g}) at (batch {}, head {}, row {})",
        report.weights_max_row_sum_err, row_sum_tolerance, worst_row_sum.batch, worst_row_sum.head,
        worst_row_sum.row);
  } else if (weights != nullptr && report.weights_max_abs_err > tolerance.max_abs) {
    report.failure =
        fmt::format("weights max abs error {:.3g} exceeds {:.1g} {}", report.weights_max_abs_err,
                    tolerance.max_abs, element_values(worst_weight, "key"));
  }
  report.passed = report.failure.empty();
  return report;
}

}  // namespace attnbench
