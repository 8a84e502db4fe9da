// The split-KV math of chunked_cuda, run on the host with the very functions its kernels call:
// cut each row's keys into the plan's splits, compute every split's partial state tile by tile
// with the online-softmax step (in float, like the kernel), combine the partials, and compare with
// the float64 oracle. No GPU needed.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "harness/core/tolerance.h"
#include "harness/cuda/launch_math.h"
#include "harness/measure/inputs.h"
#include "harness/measure/oracle.h"
#include "harness/variant/kv_rows.h"
#include "tests/edge_shapes.h"
#include "variants/cuda/chunked_cuda_traits.h"

namespace attnbench {
namespace {

using testing::make_shape;

struct Partials {
  int64_t num_splits = 0, output_rows = 0, empty = 0;
  std::vector<float> max, sum, acc;  // [split][row], [split][row], [split][row][d_v]
};

// What split_kv_partial_kernel computes, one row at a time: 32-key tiles from the split's start,
// scores in log2 units, masked keys -inf, one online step per tile.
Partials host_partials(const HostTensors& in, float scale, int64_t tiles_per_split,
                       int64_t num_splits) {
  const Shape& s = in.shape;
  Partials parts;
  parts.num_splits = num_splits;
  parts.output_rows = s.batch * s.heads * s.seq_q;
  parts.max.assign(static_cast<std::size_t>(num_splits * parts.output_rows), 0.0f);
  parts.sum = parts.max;
  parts.acc.assign(static_cast<std::size_t>(num_splits * parts.output_rows * s.d_v), 0.0f);
  const float q_scale = scale * launch::kLog2e;
  std::vector<float> query(static_cast<std::size_t>(s.d_k)), acc(static_cast<std::size_t>(s.d_v));
  std::vector<float> scores(chunked_cuda::kBlockKeys);
  // K and V rows as the kernel finds them: the bhsd strides of the inputs (the page pools for a
  // paged shape) and the block table.
  const int64_t stored_rows = s.kv_stored_rows();
  const auto rows_of = [&](int64_t d) {
    return chunked_cuda::KvRows{s.kv_heads * stored_rows * d,
                                stored_rows * d,
                                d,
                                s.kv_cache.is_paged() ? in.block_table.data() : nullptr,
                                static_cast<int>(s.pages_per_sequence()),
                                static_cast<int>(s.kv_cache.page_size)};
  };
  const chunked_cuda::KvRows k_rows = rows_of(s.d_k), v_rows = rows_of(s.d_v);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.seq_q; ++i) {
        const int64_t row = (b * s.heads + h) * s.seq_q + i;
        const int kv_head = static_cast<int>(h / s.group_size());
        const int64_t seq_kv = s.keys_of(b);  // a ragged batch's own length
        const int64_t visible = launch::visible_keys(i, s.seq_q, seq_kv, s.causal);
        for (int64_t c = 0; c < s.d_k; ++c) query[c] = in.q[row * s.d_k + c] * q_scale;
        for (int64_t split = 0; split < num_splits; ++split) {
          const int64_t begin = chunked_cuda::split_key_begin(split, tiles_per_split);
          const int64_t end =
              std::min(chunked_cuda::split_key_end(split, tiles_per_split, seq_kv), visible);
          float running_max = -INFINITY, sum = 0.0f;
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (int64_t kv0 = begin; kv0 < end; kv0 += chunked_cuda::kBlockKeys) {
            float tile_max = -INFINITY;
            for (int64_t j = 0; j < chunked_cuda::kBlockKeys; ++j) {
              const int64_t key = kv0 + j;
              float score = -INFINITY;
              if (key < end) {
                score = 0.0f;
                for (int64_t c = 0; c < s.d_k; ++c) {
                  score +=
                      query[c] * in.k[chunked_cuda::kv_row_offset(k_rows, static_cast<int>(b),
                                                                  kv_head, static_cast<int>(key)) +
                                      c];
                }
              }
              scores[j] = score;
              tile_max = std::max(tile_max, score);
            }
            const launch::OnlineStep step = launch::online_step(running_max, tile_max);
            running_max = step.max;
            sum *= step.alpha;
            for (float& a : acc) a *= step.alpha;
            for (int64_t j = 0; j < chunked_cuda::kBlockKeys && kv0 + j < end; ++j) {
              const float weight = exp2f(scores[j] - step.base);
              sum += weight;
              for (int64_t c = 0; c < s.d_v; ++c) {
                acc[c] +=
                    weight * in.v[chunked_cuda::kv_row_offset(v_rows, static_cast<int>(b), kv_head,
                                                              static_cast<int>(kv0 + j)) +
                                  c];
              }
            }
          }
          const int64_t slot = split * parts.output_rows + row;
          parts.max[slot] = running_max;
          parts.sum[slot] = sum;
          std::copy(acc.begin(), acc.end(), parts.acc.begin() + slot * s.d_v);
          if (running_max == -INFINITY) ++parts.empty;
        }
      }
  return parts;
}

// What split_kv_combine_kernel computes.
std::vector<float> host_combine(const Partials& parts, int64_t d_v) {
  std::vector<float> out(static_cast<std::size_t>(parts.output_rows * d_v));
  for (int64_t row = 0; row < parts.output_rows; ++row) {
    const launch::SplitStats stats = launch::combine_stats(
        parts.max.data() + row, parts.sum.data() + row, parts.num_splits, parts.output_rows);
    for (int64_t c = 0; c < d_v; ++c) {
      out[row * d_v + c] = launch::combine_value(parts.max.data() + row, parts.output_rows,
                                                 parts.acc.data() + row * d_v + c,
                                                 parts.output_rows * d_v, parts.num_splits, stats);
    }
  }
  return out;
}

void check_against_oracle(const HostTensors& in, float scale, const std::vector<float>& out) {
  const std::vector<double> reference = reference_output(in, scale);
  REQUIRE(out.size() == reference.size());
  double error2 = 0, reference2 = 0, max_abs = 0, max_ref = 1;
  for (std::size_t n = 0; n < out.size(); ++n) {
    REQUIRE(std::isfinite(out[n]));
    const double difference = out[n] - reference[n];
    error2 += difference * difference;
    reference2 += reference[n] * reference[n];
    max_abs = std::max(max_abs, std::abs(difference));
    max_ref = std::max(max_ref, std::abs(reference[n]));
  }
  const double rel_l2 = std::sqrt(error2 / reference2);
  INFO("rel L2 " << rel_l2 << ", max abs " << max_abs);
  const Tolerance tolerance = tolerance_for(DType::fp32);
  CHECK(rel_l2 < tolerance.rel_l2);
  CHECK(max_abs / max_ref < tolerance.max_abs);
}

TEST_CASE("split-KV partials combine to the oracle's answer", "[cuda][split]") {
  const Shape shapes[] = {
      make_shape(1, 2, 2, 1, 1000, 64, 64, false),  // decode, long KV
      make_shape(1, 4, 2, 1, 1000, 64, 64, true),   // GQA decode, causal
      make_shape(2, 2, 1, 7, 300, 48, 80, true),    // MQA, d_k != d_v, short queries
      make_shape(1, 2, 2, 100, 300, 32, 32, true),  // early rows see none of the last split
      make_shape(1, 1, 1, 50, 70, 13, 13, false),   // d not a multiple of 4
      make_shape(1, 1, 1, 3, 1, 16, 16, false),     // one key
  };
  for (const Shape& shape : shapes) {
    for (const Distribution distribution : all_distributions()) {
      // The plan's own split, and forced 64-key and 32-key splits (many splits, ragged ends).
      const chunked_cuda::SplitPlan plan = chunked_cuda::plan_split_kv(shape, 132);
      const std::pair<int64_t, int64_t> splittings[] = {{plan.tiles_per_split, plan.num_splits},
                                                        {2, launch::ceil_div(plan.kv_tiles, 2)},
                                                        {1, plan.kv_tiles}};
      for (const auto& [tiles_per_split, num_splits] : splittings) {
        INFO(describe(shape) << ", " << to_string(distribution) << ", " << num_splits
                             << " splits of " << tiles_per_split << " tiles");
        const HostTensors in = make_inputs(shape, distribution, 1234);
        const float scale = 1.0f / std::sqrt(static_cast<float>(shape.d_k));
        const Partials parts = host_partials(in, scale, tiles_per_split, num_splits);
        check_against_oracle(in, scale, host_combine(parts, shape.d_v));
      }
    }
  }
}

TEST_CASE("split-KV reads ragged batches and paged caches as the oracle does", "[cuda][split]") {
  // Each sequence's own length bounds its splits (the plan's splits cover the longest); a paged
  // cache's rows come through the block table, pages shuffled in the pool, tails part-filled.
  const Shape shapes[] = {
      testing::serving(make_shape(1, 4, 2, 1, 1, 64, 64, false), {1000, 37, 300, 1}, 0),
      testing::serving(make_shape(1, 4, 2, 1, 1, 64, 64, false), {1000, 37, 300, 1}, 16),
      testing::serving(make_shape(1, 8, 2, 4, 1, 32, 48, true), {513, 64, 77}, 5),
      testing::serving(make_shape(2, 2, 1, 3, 700, 16, 16, true), {}, 64),
  };
  for (const Shape& shape : shapes) {
    const chunked_cuda::SplitPlan plan = chunked_cuda::plan_split_kv(shape, 132);
    const std::pair<int64_t, int64_t> splittings[] = {{plan.tiles_per_split, plan.num_splits},
                                                      {1, plan.kv_tiles}};
    for (const auto& [tiles_per_split, num_splits] : splittings) {
      INFO(describe(shape) << ", " << num_splits << " splits of " << tiles_per_split << " tiles");
      const HostTensors in = make_inputs(shape, Distribution::normal, 99);
      const float scale = 1.0f / std::sqrt(static_cast<float>(shape.d_k));
      const Partials parts = host_partials(in, scale, tiles_per_split, num_splits);
      check_against_oracle(in, scale, host_combine(parts, shape.d_v));
    }
  }
}

TEST_CASE("a K/V row is where kv_row finds it, contiguous or paged", "[cuda][split]") {
  for (const int64_t page_size : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{16}}) {
    for (const Layout layout : all_layouts()) {
      Shape shape =
          testing::serving(make_shape(1, 6, 3, 1, 1, 8, 8, false), {40, 3, 17}, page_size);
      shape.layout = layout;
      INFO(describe(shape));
      const HostTensors in = make_inputs(shape, Distribution::normal, 3);
      std::vector<float> pool(static_cast<std::size_t>(shape.k_elements()));
      const AttentionViews views =
          make_views(shape, pool.data(), pool.data(), pool.data(), nullptr);
      const KvPageTable pages = page_table_of(shape, in.block_table.data());
      const chunked_cuda::KvRows rows{views.k.batch_stride,
                                      views.k.head_stride,
                                      views.k.row_stride,
                                      pages.block_table,
                                      static_cast<int>(pages.pages_per_sequence),
                                      static_cast<int>(pages.page_size)};
      for (int b = 0; b < shape.batch; ++b)
        for (int h = 0; h < shape.kv_heads; ++h)
          for (int key = 0; key < shape.keys_of(b); ++key) {
            const float* expected = kv_row<float>(views.k, pages, b, h, key);
            CHECK(pool.data() + chunked_cuda::kv_row_offset(rows, b, h, key) == expected);
          }
    }
  }
}

TEST_CASE("splits that see no key of a row add nothing", "[cuda][split]") {
  // Causal, seq_q 100 < seq_kv 300: row 0 sees keys 0..200, so 64-key splits past 200 are empty.
  const Shape shape = make_shape(1, 1, 1, 100, 300, 16, 16, true);
  const HostTensors in = make_inputs(shape, Distribution::normal, 7);
  const Partials parts = host_partials(in, 0.25f, 2, 5);
  CHECK(parts.empty > 0);
  check_against_oracle(in, 0.25f, host_combine(parts, shape.d_v));
}

TEST_CASE("online step and state merge", "[cuda][split]") {
  // Nothing seen yet, nothing in the tile: no NaN.
  const launch::OnlineStep empty = launch::online_step(-INFINITY, -INFINITY);
  CHECK(empty.max == -INFINITY);
  CHECK(empty.base == 0.0f);
  CHECK(empty.alpha == 0.0f);
  CHECK(exp2f(-INFINITY - empty.base) == 0.0f);
  // First tile: the old (empty) state is scaled by 0.
  const launch::OnlineStep first = launch::online_step(-INFINITY, 3.0f);
  CHECK(first.max == 3.0f);
  CHECK(first.alpha == 0.0f);
  // The max grows by 2: the old sum shrinks by 2^-2.
  const launch::OnlineStep grow = launch::online_step(3.0f, 5.0f);
  CHECK(grow.max == 5.0f);
  CHECK(grow.alpha == Approx(0.25f));
  // A fully masked tile leaves the state alone.
  const launch::OnlineStep masked = launch::online_step(3.0f, -INFINITY);
  CHECK(masked.max == 3.0f);
  CHECK(masked.alpha == 1.0f);

  // Merging the states of two halves gives the state of the whole.
  const std::vector<float> scores = {1.0f, -2.0f, 7.5f, 0.25f, 3.0f, -40.0f, 6.0f};
  auto state_of = [](const float* begin, const float* end) {
    launch::SoftmaxState state{-INFINITY, 0.0f};
    for (const float* x = begin; x != end; ++x) state.max = std::max(state.max, *x);
    for (const float* x = begin; x != end; ++x) state.sum += exp2f(*x - state.max);
    return state;
  };
  const launch::SoftmaxState whole = state_of(scores.data(), scores.data() + scores.size());
  for (std::size_t cut = 0; cut <= scores.size(); ++cut) {
    const launch::SoftmaxState merged =
        launch::merge_states(state_of(scores.data(), scores.data() + cut),
                             state_of(scores.data() + cut, scores.data() + scores.size()));
    CHECK(merged.max == whole.max);
    CHECK(merged.sum == Approx(whole.sum).epsilon(1e-6));
  }
  const launch::SoftmaxState none = launch::merge_states({-INFINITY, 0.0f}, {-INFINITY, 0.0f});
  CHECK(none.max == -INFINITY);
  CHECK(none.sum == 0.0f);
}

TEST_CASE("combine with no split that saw a key gives zeros, not NaN", "[cuda][split]") {
  const float maxes[] = {-INFINITY, -INFINITY};
  const float sums[] = {0.0f, 0.0f};
  const float accs[] = {0.0f, 0.0f};
  const launch::SplitStats stats = launch::combine_stats(maxes, sums, 2, 1);
  CHECK(stats.inv_sum == 0.0f);
  CHECK(launch::combine_value(maxes, 1, accs, 1, 2, stats) == 0.0f);
}

}  // namespace
}  // namespace attnbench
