// cublas' GEMM arguments, checked without a GPU: the very GemmCalls cublas.cu hands to
// cublasGemmStridedBatchedEx (cublas_gemm_plan.h), run through a reference column-major
// strided-batched GEMM with cuBLAS's semantics, between host versions of cublas' row kernels
// (softmax, D = rowsum(dO o O), dS = P o (dP - D)), then compared with the float64 oracle:
// O from the forward's two products, dQ, dK and dV from the backward's five. Both layouts, GQA,
// seq_q != seq_kv, d_k != d_v, causal.
#include "variants/cuda/cublas_gemm_plan.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "harness/measure/backward_oracle.h"
#include "harness/measure/checked_run.h"
#include "harness/measure/inputs.h"
#include "harness/measure/oracle.h"
#include "harness/measure/tensor_packing.h"
#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

using cublas_plan::GemmCall;
using cublas_plan::Op;
using testing::make_shape;

// What cublasGemmStridedBatchedEx computes for `call`, in float, on host memory: for each of the
// `count` matrices, C = alpha op(A) op(B) + beta C, all column-major.
void reference_gemm(const GemmCall& call) {
  REQUIRE(call.a.dtype == DType::fp32);
  REQUIRE(call.b.dtype == DType::fp32);
  REQUIRE(call.c.dtype == DType::fp32);
  for (int64_t batch = 0; batch < call.count; ++batch) {
    const float* a = static_cast<const float*>(call.a.data) + batch * call.a.stride;
    const float* b = static_cast<const float*>(call.b.data) + batch * call.b.stride;
    float* c = const_cast<float*>(static_cast<const float*>(call.c.data)) + batch * call.c.stride;
    for (int64_t j = 0; j < call.n; ++j) {
      for (int64_t i = 0; i < call.m; ++i) {
        double sum = 0;
        for (int64_t l = 0; l < call.k; ++l) {
          const float a_il = call.op_a == Op::plain ? a[i + l * call.a.ld] : a[l + i * call.a.ld];
          const float b_lj = call.op_b == Op::plain ? b[l + j * call.b.ld] : b[j + l * call.b.ld];
          sum += static_cast<double>(a_il) * b_lj;
        }
        float& out = c[i + j * call.c.ld];
        out = static_cast<float>(call.alpha * sum + (call.beta == 0.0f ? 0.0 : call.beta * out));
      }
    }
  }
}

// Edits a stage's calls before they run (a test's mutation); by default none.
using CallHook = std::function<void(std::vector<GemmCall>&)>;

void run_all(std::vector<GemmCall> calls, const CallHook& hook) {
  if (hook) hook(calls);
  for (const GemmCall& call : calls) reference_gemm(call);
}

// One row of a query-head tensor in the case's layout, by its index among batch * heads * seq_q.
float* query_row(const TensorView& view, int64_t row) {
  const int64_t seq = view.seq, heads = view.heads;
  return view.row<float>(row / (heads * seq), (row / seq) % heads, row % seq);
}

struct HostRun {
  std::vector<float> o;        // bhsd
  Gradients<float> gradients;  // bhsd
};

// cublas' forward and backward on the host: its GemmCalls and its row kernels' arithmetic.
HostRun run_cublas_on_host(const HostTensors& in, float scale, const CallHook& hook = {}) {
  const Shape& s = in.shape;
  const PackedInputs packed = pack_inputs(in);
  std::vector<std::byte> o_bytes(static_cast<std::size_t>(s.o_elements()) * sizeof(float));
  const HostBuffer dout_bytes =
      pack_tensor(in.dout, s.dtype, s.layout, s.batch, s.heads, s.seq_q, s.d_v);
  std::vector<float> dq(static_cast<std::size_t>(s.q_elements()), NAN),
      dk(static_cast<std::size_t>(s.k_elements()), NAN),
      dv(static_cast<std::size_t>(s.v_elements()), NAN);
  Problem forward;
  forward.shape = s;
  forward.scale = scale;
  forward.tensors =
      make_views(s, packed.q.data(), packed.k.data(), packed.v.data(), o_bytes.data());
  const BackwardProblem backward =
      backward_problem_of(forward, dout_bytes.data(), dq.data(), dk.data(), dv.data());

  // Forward: S in log2 units, softmax_rows_kernel's arithmetic, O = P V.
  std::vector<float> p(static_cast<std::size_t>(s.weight_elements()), NAN);
  run_all(cublas_plan::score_gemms(s, forward.tensors, p.data(), scale * 1.4426950408889634f), {});
  for (int64_t row = 0; row < s.batch * s.heads * s.seq_q; ++row) {
    float* x = p.data() + row * s.seq_kv;
    const int64_t visible = std::max<int64_t>(0, s.visible_keys(row % s.seq_q));
    float max = -INFINITY, sum = 0;
    for (int64_t key = 0; key < visible; ++key) max = std::max(max, x[key]);
    for (int64_t key = 0; key < visible; ++key) sum += std::exp2(x[key] - max);
    for (int64_t key = 0; key < s.seq_kv; ++key)
      x[key] = key < visible ? std::exp2(x[key] - max) / sum : 0.0f;
  }
  run_all(cublas_plan::output_gemms(s, forward.tensors, p.data(), DType::fp32), {});

  // Backward: dV, dP, D, dS, then dQ and dK.
  std::vector<float> ds(p.size(), NAN),
      row_dot(static_cast<std::size_t>(s.batch * s.heads * s.seq_q));
  run_all(cublas_plan::value_gradient_gemms(s, backward.dout, backward.dv, p.data(), DType::fp32),
          hook);
  run_all(cublas_plan::probability_gradient_gemms(s, backward.dout, backward.tensors.v, ds.data()),
          hook);
  for (int64_t row = 0; row < static_cast<int64_t>(row_dot.size()); ++row) {
    const float* o = query_row(backward.tensors.o, row);
    const float* d_o = query_row(backward.dout, row);
    float dot = 0;
    for (int64_t c = 0; c < s.d_v; ++c) dot += o[c] * d_o[c];
    row_dot[static_cast<std::size_t>(row)] = dot;
  }
  for (std::size_t i = 0; i < ds.size(); ++i)
    ds[i] = p[i] * (ds[i] - row_dot[i / static_cast<std::size_t>(s.seq_kv)]);
  run_all(cublas_plan::input_gradient_gemms(s, backward.tensors, backward.dq, backward.dk,
                                            ds.data(), DType::fp32, scale),
          hook);

  HostRun run;
  unpack_tensor(o_bytes.data(), DType::fp32, s.layout, s.batch, s.heads, s.seq_q, s.d_v, run.o);
  unpack_tensor(dq.data(), DType::fp32, s.layout, s.batch, s.heads, s.seq_q, s.d_k,
                run.gradients.dq);
  unpack_tensor(dk.data(), DType::fp32, s.layout, s.batch, s.kv_heads, s.seq_kv, s.d_k,
                run.gradients.dk);
  unpack_tensor(dv.data(), DType::fp32, s.layout, s.batch, s.kv_heads, s.seq_kv, s.d_v,
                run.gradients.dv);
  return run;
}

TEST_CASE("cublas' GEMM calls give the oracle's output and gradients", "[cuda][cublas][backward]") {
  const std::vector<testing::NamedShape> shapes = {
      {"b2 GQA 4 over 2, seq_q < seq_kv, d_k != d_v", make_shape(2, 4, 2, 7, 19, 16, 8, false)},
      {"causal GQA 3 over 1", make_shape(1, 3, 1, 11, 11, 8, 12, true)},
      {"causal seq_q < seq_kv (aligned to the end)", make_shape(2, 2, 2, 5, 13, 8, 8, true)},
      {"b3 MHA seq 1", make_shape(3, 2, 2, 1, 1, 4, 4, false)},
  };
  for (const auto& [name, fwd_shape] : shapes) {
    for (Layout layout : all_layouts()) {
      Shape shape = fwd_shape;
      shape.layout = layout;
      shape.pass = Pass::bwd;
      INFO(name << ", " << to_string(layout));
      const HostTensors in = make_inputs(shape, Distribution::normal, 77);
      const float scale = default_scale(shape);
      const HostRun run = run_cublas_on_host(in, scale);
      const OracleReport forward =
          check_against_reference(in, scale, run.o, nullptr, Precision::fp32, OracleOptions{});
      INFO(forward.failure);
      CHECK(forward.passed);
      const OracleReport backward =
          check_gradients(in, scale, run.gradients, run.o, Precision::fp32, OracleOptions{});
      INFO(backward.failure);
      CHECK(backward.passed);
    }
  }
}

TEST_CASE("in bshd a GQA group's later members add into dK and dV, and must",
          "[cuda][cublas][backward]") {
  Shape shape = make_shape(2, 4, 2, 6, 9, 8, 8, false);
  shape.layout = Layout::bshd;
  shape.pass = Pass::bwd;
  const HostTensors in = make_inputs(shape, Distribution::normal, 5);
  const float scale = default_scale(shape);
  // One call per (batch, member), batched over the kv heads: members 1 add (beta 1).
  std::vector<float> betas;
  const HostRun run = run_cublas_on_host(in, scale, [&](std::vector<GemmCall>& calls) {
    for (const GemmCall& call : calls) betas.push_back(call.beta);
  });
  CHECK(check_gradients(in, scale, run.gradients, run.o, Precision::fp32, OracleOptions{}).passed);
  CHECK(std::count(betas.begin(), betas.end(), 1.0f) == 2 * 2);  // dV and dK, member 1 of b 0, 1
  // With every beta 0, dK and dV keep the last member's part only: the oracle sees it.
  const HostRun overwritten = run_cublas_on_host(in, scale, [](std::vector<GemmCall>& calls) {
    for (GemmCall& call : calls) call.beta = 0.0f;
  });
  const OracleReport report = check_gradients(in, scale, overwritten.gradients, overwritten.o,
                                              Precision::fp32, OracleOptions{});
  CHECK_FALSE(report.passed);
  CHECK_THAT(report.failure, Catch::Contains("dK") || Catch::Contains("dV"));
}

}  // namespace
}  // namespace attnbench
