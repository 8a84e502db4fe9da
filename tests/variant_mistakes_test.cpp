// The mistakes a new variant makes, and what the harness does about them: a typed view of the
// wrong element type or out of its tensor fails the case with one line naming the variant, the
// tensor and its dtype (never a write past O); a workspace array whose size overflows is refused;
// the oracle's sampled check sees a wrong row of any head; every oracle failure says where.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include "harness/measure/checked_run.h"
#include "harness/measure/cpu_executor.h"
#include "harness/measure/inputs.h"
#include "harness/variant/parallel_errors.h"
#include "harness/variant/registry.h"
#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

using testing::make_shape;

// Not registered: declares bf16 (and fp32), then reads every tensor as float whatever the dtype,
// as a variant copied from an fp32-only one does. On bf16 each O row it writes is twice as long
// as the row stored, so the last head's rows run past the end of O.
class ReadsEveryDtypeAsFloat final : public Variant {
 public:
  explicit ReadsEveryDtypeAsFloat(bool in_parallel) : in_parallel_(in_parallel) {}
  VariantInfo info() const override {
    VariantInfo info{"reads_bf16_as_float", Device::cpu, "declares bf16, reads float", {}};
    info.capabilities.dtypes = {DType::fp32, DType::bf16};
    return info;
  }
  std::size_t workspace_bytes(const Shape&) const override { return 0; }
  void prepare(const Shape&, Workspace&) override {}
  void run(const Problem& p) override {
    const Shape& s = p.shape;
    if (!in_parallel_) {
      for (int64_t b = 0; b < s.batch; ++b)
        for (int64_t h = 0; h < s.heads; ++h) copy_v_to_o(s, p.head<float>(b, h));
      return;
    }
    ParallelErrors errors;
#pragma omp parallel for
    for (int64_t bh = 0; bh < s.batch * s.heads; ++bh)
      errors.capture([&] { copy_v_to_o(s, p.head<float>(bh / s.heads, bh % s.heads)); });
    errors.rethrow_first();
  }

 private:
  static void copy_v_to_o(const Shape& s, const HeadView<float>& head) {
    for (int64_t i = 0; i < s.seq_q; ++i)
      for (int64_t c = 0; c < s.d_v; ++c)
        head.o[i * head.o_row_stride + c] = head.v[i % s.seq_kv * head.v_row_stride + c];
  }
  bool in_parallel_;
};

OracleReport run_on(Variant& variant, const Shape& shape, const OracleOptions& options = {}) {
  CpuExecutor executor;
  variant.prepare(shape, executor.workspace());
  const HostTensors inputs = make_inputs(shape, Distribution::normal, 3);
  return run_checked(variant, executor, inputs, default_scale(shape), false, options);
}

TEST_CASE("a variant that declares bf16 but reads float fails its case with one line",
          "[variant_mistakes]") {
  Shape shape = make_shape(2, 3, 3, 40, 40, 32, 32, false);
  shape.dtype = DType::bf16;
  for (bool in_parallel : {false, true}) {
    INFO((in_parallel ? "in an OpenMP loop" : "in a serial loop"));
    ReadsEveryDtypeAsFloat variant(in_parallel);
    const OracleReport report = run_on(variant, shape);
    CHECK_FALSE(report.passed);
    CHECK_THAT(report.failure, Catch::StartsWith("run failed: variant reads_bf16_as_float: "));
    CHECK_THAT(report.failure, Catch::Contains("tensor q holds bf16"));
    CHECK_THAT(report.failure, Catch::Contains("read as float"));
    CHECK(report.failure.find('\n') == std::string::npos);
  }
  // The same variant is right where float is the stored type: the check is on the type, not on
  // the variant.
  shape.dtype = DType::fp32;
  ReadsEveryDtypeAsFloat variant(false);
  const OracleReport fp32 = run_on(variant, shape);
  CHECK_THAT(fp32.failure, !Catch::Contains("run failed"));
}

TEST_CASE("a typed row of the wrong element size or out of its tensor throws, naming it",
          "[variant_mistakes]") {
  const Shape shape = make_shape(2, 4, 2, 6, 9, 8, 8, false);
  std::vector<float> storage(static_cast<std::size_t>(2 * 4 * 9 * 8));
  const AttentionViews views =
      make_views(shape, storage.data(), storage.data(), storage.data(), storage.data());
  SECTION("uint16_t on fp32") {
    CHECK_THROWS_MATCHES(views.o.row<uint16_t>(0, 0, 0), TensorAccessError,
                         Catch::Message("tensor o holds fp32 (4-byte elements) but was read as "
                                        "uint16_t (2-byte elements): head<T> and row<T> take "
                                        "float for fp32 and uint16_t for bf16 and fp16"));
    CHECK_THROWS_AS(views.k.row<const double>(0, 0, 0), TensorAccessError);
  }
  SECTION("float on bf16 and fp16, through Problem::head") {
    for (DType dtype : {DType::bf16, DType::fp16}) {
      Problem problem;
      problem.shape = shape;
      problem.shape.dtype = dtype;
      problem.tensors =
          make_views(problem.shape, storage.data(), storage.data(), storage.data(), storage.data());
      CHECK_THROWS_WITH(problem.head<float>(0, 0),
                        Catch::StartsWith(std::string("tensor q holds ") + to_string(dtype)));
      CHECK_NOTHROW(problem.head<uint16_t>(1, 3));
    }
  }
  SECTION("batch, head and row out of range, negative ones too") {
    CHECK_NOTHROW(views.k.row<float>(1, 1, 8));
    CHECK_THROWS_MATCHES(
        views.k.row<float>(2, 0, 0), TensorAccessError,
        Catch::Message("tensor k has no (batch 2, head 0, row 0): it is [batch 2, heads 2, seq 9, "
                       "d 8]"));
    CHECK_THROWS_AS(views.k.row<float>(0, 2, 0), TensorAccessError);  // kv_heads is 2
    CHECK_THROWS_AS(views.q.row<float>(0, 0, 6), TensorAccessError);  // seq_q is 6
    CHECK_THROWS_AS(views.v.row<float>(-1, 0, 0), TensorAccessError);
    CHECK_THROWS_AS(views.v.address(0, 0, -1), TensorAccessError);
    CHECK_THROWS_AS(views.o.address(0, 4, 0), TensorAccessError);
  }
  SECTION("a query head past the shape's heads, through head_view") {
    CHECK_THROWS_WITH(head_view<float>(shape, views, nullptr, 0, 4),
                      Catch::StartsWith("tensor q has no (batch 0, head 4, row 0)"));
  }
}

TEST_CASE("a workspace array whose size in bytes overflows is refused, not wrapped",
          "[variant_mistakes]") {
  HostWorkspace workspace;
  constexpr std::size_t largest = std::numeric_limits<std::size_t>::max();
  // largest / 4 + 1 floats is 2^64 + 4 bytes: wrapped, that is a 4-byte block.
  CHECK_THROWS_WITH(workspace.allocate_array<float>(largest / 4 + 1),
                    Catch::Contains("overflows") && Catch::Contains("4 bytes"));
  CHECK_THROWS_AS(workspace.allocate_array<double>(largest / 8), std::runtime_error);
  // A byte count the 64-byte rounding would wrap to 0.
  CHECK_THROWS_AS(workspace.allocate(largest - 10), std::bad_alloc);
  CHECK(workspace.current_bytes() == 0);
  CHECK(workspace.allocate_array<float>(16) != nullptr);
  CHECK(workspace.current_bytes() == 64);
}

// Not registered: naive's output with one element of one row changed, as a variant that gets
// one head's edge wrong (a tile, a mask boundary) does.
class BreaksOneRow final : public Variant {
 public:
  BreaksOneRow(int64_t batch, int64_t head, int64_t row)
      : inner_(Registry::instance().find("naive")->make()), batch_(batch), head_(head), row_(row) {}
  VariantInfo info() const override {
    return {"breaks_one_row", Device::cpu, "naive with one row wrong", {}};
  }
  std::size_t workspace_bytes(const Shape& s) const override { return inner_->workspace_bytes(s); }
  void prepare(const Shape& s, Workspace& workspace) override { inner_->prepare(s, workspace); }
  void run(const Problem& p) override {
    inner_->run(p);
    if (row_ >= 0) p.tensors.o.row<float>(batch_, head_, row_)[0] += 0.5f;
  }

 private:
  std::unique_ptr<Variant> inner_;
  int64_t batch_, head_, row_;
};

TEST_CASE("above full_check_max_n the oracle checks the first and last row of every head",
          "[variant_mistakes]") {
  // Defaults: every row up to n 512, then sampled. Batch 2 x 3 heads, so (0, 0, 0) and the last
  // row of (1, 2) are not the only edges.
  const OracleOptions options;
  for (int64_t n : {1024, 2048}) {
    const Shape shape = make_shape(2, 3, 3, n, n, 16, 16, false);
    INFO("n " << n);
    BreaksOneRow correct(0, 0, -1);
    const OracleReport control = run_on(correct, shape, options);
    INFO(control.failure);
    REQUIRE(control.passed);
    CHECK(control.sampled);
    // 2 rows of each of 6 heads, and the random rows on top (one drawn twice counts once).
    CHECK(control.rows_checked > 2 * 6);
    CHECK(control.rows_checked <= 2 * 6 + options.sample_rows);

    const struct {
      int64_t batch, head, row;
    } broken_rows[] = {{1, 0, 0}, {0, 1, n - 1}, {1, 1, 0}, {0, 2, n - 1}};
    for (const auto& broken : broken_rows) {
      BreaksOneRow variant(broken.batch, broken.head, broken.row);
      const OracleReport report = run_on(variant, shape, options);
      CHECK_FALSE(report.passed);
      CHECK_THAT(report.failure,
                 Catch::Contains(fmt::format("(batch {}, head {}, row {}, col 0)", broken.batch,
                                             broken.head, broken.row)));
    }
  }
}

TEST_CASE("a sampled check of one query row per head compares each row once",
          "[variant_mistakes]") {
  // seq_kv alone is past full_check_max_n (decoding): first row = last row, and the random rows
  // can only repeat them.
  const Shape shape = make_shape(2, 4, 4, 1, 600, 16, 16, false);
  const HostTensors in = make_inputs(shape, Distribution::normal, 5);
  const std::vector<double> reference = reference_output(in, 0.25);
  const std::vector<float> o(reference.begin(), reference.end());
  const OracleReport report = check_against_reference(in, 0.25, o, nullptr, Precision::fp32, {});
  CHECK(report.passed);
  CHECK(report.sampled);
  CHECK(report.rows_checked == 2 * 4);
}

// The reference of a shape, as fp32, with the oracle's inputs.
struct ReferenceOutput {
  Shape shape;
  HostTensors in;
  std::vector<float> o, weights;
  explicit ReferenceOutput(const Shape& s) : shape(s), in(make_inputs(s, Distribution::normal, 9)) {
    std::vector<double> w;
    const std::vector<double> out = reference_output(in, 0.25, &w);
    o.assign(out.begin(), out.end());
    weights.assign(w.begin(), w.end());
  }
  float& at(int64_t b, int64_t h, int64_t row, int64_t col) {
    return o[static_cast<std::size_t>(((b * shape.heads + h) * shape.seq_q + row) * shape.d_v +
                                      col)];
  }
  OracleReport check(bool with_weights = false) const {
    return check_against_reference(in, 0.25, o, with_weights ? &weights : nullptr, Precision::fp32,
                                   {});
  }
};

TEST_CASE("every oracle failure says where its worst element is, what it got and expected",
          "[variant_mistakes]") {
  SECTION("relative L2 above the tolerance") {
    ReferenceOutput r(make_shape(2, 2, 2, 12, 12, 8, 8, false));
    const float expected = r.at(1, 0, 3, 5);
    r.at(1, 0, 3, 5) += 0.25f;
    r.at(0, 1, 7, 2) += 0.01f;  // smaller: not the worst
    const OracleReport report = r.check();
    CHECK_FALSE(report.passed);
    CHECK_THAT(report.failure, Catch::StartsWith("relative L2 error"));
    CHECK_THAT(report.failure, Catch::Contains("at (batch 1, head 0, row 3, col 5): got " +
                                               fmt::format("{:.6g}", expected + 0.25f)));
    CHECK_THAT(report.failure, Catch::Contains("abs tolerance"));
    CHECK_THAT(report.failure, Catch::Contains("reference"));
    CHECK(report.worst_output.batch == 1);
    CHECK(report.worst_output.head == 0);
    CHECK(report.worst_output.row == 3);
    CHECK(report.worst_output.column == 5);
    CHECK(report.worst_output.reference == Approx(expected));
  }
  SECTION("max abs above the tolerance while relative L2 is within it") {
    // Many elements make one small error vanish in the L2 norm but not in the max.
    ReferenceOutput r(make_shape(2, 4, 4, 128, 128, 64, 64, false));
    r.at(1, 3, 100, 63) += 3e-4f;
    const OracleReport report = r.check();
    INFO(report.failure);
    REQUIRE(report.rel_l2_err < report.rel_l2_tolerance);
    CHECK_FALSE(report.passed);
    CHECK_THAT(report.failure, Catch::StartsWith("max abs error"));
    CHECK_THAT(report.failure, Catch::Contains("at (batch 1, head 3, row 100, col 63): got "));
    CHECK_THAT(report.failure, Catch::Contains("reference"));
  }
  SECTION("NaN, with the reference of that element") {
    ReferenceOutput r(make_shape(1, 2, 2, 12, 12, 8, 8, false));
    r.at(0, 1, 4, 6) = std::numeric_limits<float>::quiet_NaN();
    const OracleReport report = r.check();
    CHECK_THAT(report.failure,
               Catch::Contains("NaN (unwritten or invalid) at (batch 0, head 1, row 4, col 6): "
                               "got nan, reference"));
  }
  SECTION("weights: a row that does not sum to 1, a weight far from the reference") {
    const Shape shape = make_shape(1, 2, 2, 12, 12, 8, 8, false);
    ReferenceOutput r(shape);
    r.weights[static_cast<std::size_t>((1 * 12 + 9) * 12 + 4)] += 0.01f;
    CHECK_THAT(r.check(true).failure,
               Catch::Contains("sums to 1") && Catch::Contains("at (batch 0, head 1, row 9)"));
    ReferenceOutput moved(shape);
    // Weight moved between two keys of one row: the row still sums to 1.
    moved.weights[static_cast<std::size_t>((0 * 12 + 2) * 12 + 3)] += 0.01f;
    moved.weights[static_cast<std::size_t>((0 * 12 + 2) * 12 + 4)] -= 0.01f;
    CHECK_THAT(moved.check(true).failure, Catch::StartsWith("weights max abs error") &&
                                              Catch::Contains("(batch 0, head 0, row 2, key "));
  }
}

}  // namespace
}  // namespace attnbench
