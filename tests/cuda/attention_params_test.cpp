// The CUDA kernels' parameter block (harness/cuda/attention_params.h), checked on the host: in
// either layout, indexing through its strides as the kernels do (batch * batch_stride + head *
// head_stride + row * row_stride + column) reaches the element the bhsd index names, for Q, O and
// the GQA K/V heads; the shape, scale and mask come through; the 16-byte flag follows alignment,
// strides and row length; and a size that does not fit the kernels' ints is refused.
#include "harness/cuda/attention_params.h"

#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/measure/tensor_packing.h"
#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

using testing::make_shape;

// Each element's own bhsd index as its value (exact in fp32 at these sizes).
std::vector<float> iota(int64_t elements) {
  std::vector<float> values(static_cast<std::size_t>(elements));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  return values;
}

// Every element of a [batch][heads][seq][dim] tensor read through the params' strides holds its
// bhsd index.
void check_reads(const void* base, int64_t batch_stride, int64_t head_stride, int row_stride,
                 int64_t batch, int64_t heads, int64_t seq, int64_t dim) {
  const auto* data = static_cast<const float*>(base);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t s = 0; s < seq; ++s)
        for (int64_t d = 0; d < dim; ++d) {
          const float expected = static_cast<float>(((b * heads + h) * seq + s) * dim + d);
          REQUIRE(data[b * batch_stride + h * head_stride + s * row_stride + d] == expected);
        }
}

TEST_CASE("AttentionParams strides reach every element in bhsd and bshd", "[cuda][params]") {
  for (const Layout layout : all_layouts()) {
    INFO(to_string(layout));
    Shape shape = make_shape(2, 6, 3, 5, 7, 12, 8, true);  // GQA group 2, d_k != d_v
    shape.layout = layout;
    const HostBuffer q = pack_tensor(iota(shape.q_elements()), DType::fp32, layout, shape.batch,
                                     shape.heads, shape.seq_q, shape.d_k);
    const HostBuffer k = pack_tensor(iota(shape.k_elements()), DType::fp32, layout, shape.batch,
                                     shape.kv_heads, shape.seq_kv, shape.d_k);
    const HostBuffer v = pack_tensor(iota(shape.v_elements()), DType::fp32, layout, shape.batch,
                                     shape.kv_heads, shape.seq_kv, shape.d_v);
    std::vector<float> o(static_cast<std::size_t>(shape.o_elements()), -1.0f);
    Problem problem;
    problem.shape = shape;
    problem.scale = 0.25f;
    problem.tensors = make_views(shape, q.data(), k.data(), v.data(), o.data());

    const AttentionParams p = make_attention_params(problem, nullptr);
    CHECK(p.batch == 2);
    CHECK(p.heads == 6);
    CHECK(p.kv_heads == 3);
    CHECK(p.group == 2);
    CHECK(p.seq_q == 5);
    CHECK(p.seq_kv == 7);
    CHECK(p.d_k == 12);
    CHECK(p.d_v == 8);
    CHECK(p.scale_log2 == 0.25f * launch::kLog2e);
    CHECK(p.mask.kind == MaskKind::causal);
    CHECK(p.mask.seq_q == 5);
    CHECK(p.mask.seq_kv == 7);
    CHECK_FALSE(mask_math::any_modifier(p.modifiers));

    check_reads(p.q, p.q_batch_stride, p.q_head_stride, p.q_row_stride, shape.batch, shape.heads,
                shape.seq_q, shape.d_k);
    check_reads(p.k, p.k_batch_stride, p.k_head_stride, p.k_row_stride, shape.batch, shape.kv_heads,
                shape.seq_kv, shape.d_k);
    check_reads(p.v, p.v_batch_stride, p.v_head_stride, p.v_row_stride, shape.batch, shape.kv_heads,
                shape.seq_kv, shape.d_v);

    // O written through the strides, each element its bhsd index, reads back in bhsd order.
    auto* out = static_cast<float*>(p.o);
    for (int64_t b = 0; b < shape.batch; ++b)
      for (int64_t h = 0; h < shape.heads; ++h)
        for (int64_t s = 0; s < shape.seq_q; ++s)
          for (int64_t d = 0; d < shape.d_v; ++d) {
            out[b * p.o_batch_stride + h * p.o_head_stride + s * p.o_row_stride + d] =
                static_cast<float>(((b * shape.heads + h) * shape.seq_q + s) * shape.d_v + d);
          }
    std::vector<float> o_bhsd;
    unpack_tensor(o.data(), DType::fp32, layout, shape.batch, shape.heads, shape.seq_q, shape.d_v,
                  o_bhsd);
    CHECK(o_bhsd == iota(shape.o_elements()));
  }
}

TEST_CASE("AttentionParams carries the documents mask and the score modifiers", "[cuda][params]") {
  Shape shape = testing::with_mask(make_shape(1, 4, 4, 300, 300, 64, 64, false),
                                   MaskSpec::documents({100, 1, 150, 49}));
  shape.alibi = true;
  shape.softcap = 30;
  const int starts[] = {0, 100, 101, 251};
  Problem problem;
  problem.shape = shape;
  problem.tensors = make_views(shape, nullptr, nullptr, nullptr, nullptr);
  const AttentionParams p = make_attention_params(problem, starts);
  CHECK(p.mask.kind == MaskKind::documents);
  CHECK(p.mask.document_starts == starts);
  CHECK(p.mask.documents == 4);
  CHECK(p.modifiers.alibi);
  CHECK(p.modifiers.softcap_log2 == Approx(30 * launch::kLog2e));
}

// The flags of a problem whose tensors sit at `base` bytes past a 16-byte boundary.
AttentionParams params_at(const Shape& shape, std::uintptr_t base) {
  Problem problem;
  problem.shape = shape;
  const auto* at = reinterpret_cast<const void*>(std::uintptr_t{1} << 20 | base);
  problem.tensors = make_views(shape, at, at, at, const_cast<void*>(at));
  return make_attention_params(problem, nullptr);
}

TEST_CASE("AttentionParams marks rows that are whole aligned 16-byte chunks", "[cuda][params]") {
  for (const Layout layout : all_layouts()) {
    INFO(to_string(layout));
    Shape fp32 = make_shape(1, 3, 3, 9, 9, 12, 8, false);
    fp32.layout = layout;
    const AttentionParams aligned = params_at(fp32, 0);
    CHECK(aligned.q_aligned_rows);
    CHECK(aligned.k_aligned_rows);
    CHECK(aligned.v_aligned_rows);
    CHECK(aligned.o_aligned_rows);
    const AttentionParams shifted = params_at(fp32, 4);  // one float past the boundary
    CHECK_FALSE(shifted.q_aligned_rows);
    CHECK_FALSE(shifted.o_aligned_rows);

    Shape odd_d = fp32;
    odd_d.d_k = 13;  // rows of 52 bytes: Q and K copy element by element, V and O still whole
    const AttentionParams odd = params_at(odd_d, 0);
    CHECK_FALSE(odd.q_aligned_rows);
    CHECK_FALSE(odd.k_aligned_rows);
    CHECK(odd.v_aligned_rows);
    CHECK(odd.o_aligned_rows);

    Shape bf16 = make_shape(1, 3, 1, 9, 9, 64, 60, false);
    bf16.layout = layout;
    bf16.dtype = DType::bf16;
    const AttentionParams narrow = params_at(bf16, 0);
    CHECK(narrow.q_aligned_rows);  // 128-byte rows
    CHECK(narrow.k_aligned_rows);
    CHECK_FALSE(narrow.v_aligned_rows);  // 120-byte rows
    CHECK_FALSE(narrow.o_aligned_rows);
  }

  // Whole 16-byte rows, but rows 24 bytes apart: only a stride breaks the alignment.
  Shape shape = make_shape(1, 1, 1, 4, 4, 4, 4, false);
  Problem problem;
  problem.shape = shape;
  problem.tensors = make_views(shape, nullptr, nullptr, nullptr, nullptr);
  problem.tensors.k.row_stride = 6;
  const AttentionParams strided = make_attention_params(problem, nullptr);
  CHECK(strided.q_aligned_rows);
  CHECK_FALSE(strided.k_aligned_rows);
  CHECK(strided.k_row_stride == 6);
}

TEST_CASE("AttentionParams refuses sizes past the kernels' 32-bit ints", "[cuda][params]") {
  const auto message = [](const Shape& shape) {
    Problem problem;
    problem.shape = shape;
    problem.tensors = make_views(shape, nullptr, nullptr, nullptr, nullptr);
    try {
      make_attention_params(problem, nullptr);
    } catch (const std::runtime_error& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  CHECK(message(make_shape(1, 1, 1, 1, 1, 16, 16, false)).empty());
  const std::string seq_kv = message(make_shape(1, 1, 1, 1, int64_t{3} << 30, 16, 16, false));
  CHECK(seq_kv.find("seq_kv") != std::string::npos);
  CHECK(seq_kv.find("32-bit") != std::string::npos);
  // bshd: a row stride of heads * d = 2^31 elements.
  Shape wide = make_shape(1, int64_t{1} << 16, int64_t{1} << 16, 1, 1, int64_t{1} << 15, 16, false);
  wide.layout = Layout::bshd;
  CHECK(message(wide).find("Q row stride") != std::string::npos);
}

}  // namespace
}  // namespace attnbench
