// flash_tc's tile algorithm run on the host, step for step as the kernel does it, and compared
// with the float64 oracle at the bf16/fp16 tolerance: the best check there is without a GPU.
// Inputs are packed in the case's dtype and layout and read through the same strides; tiles are
// copied into swizzled emulated shared memory (mma::tile_offset, zero-filled like cp.async);
// fragments come from the kernel's ldmatrix addresses through an emulated ldmatrix; products go
// through an emulated mma.sync that places elements by the PTX fragment maps; the mask, tile
// skipping, online softmax (launch::online_step), quad shuffles, P rounded to the dtype in the
// A-fragment registers, the normalisation and the staged 16-byte O stores follow the kernel.
// What this cannot see: races, the cp.async group accounting, and what the hardware does that the
// PTX description does not say.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <vector>

#include "harness/core/element.h"
#include "harness/core/tensor.h"
#include "harness/cuda/mma_fragments.h"
#include "harness/measure/checked_run.h"
#include "harness/measure/inputs.h"
#include "harness/measure/oracle.h"
#include "harness/measure/tensor_packing.h"
#include "tests/cuda/mma_emulation.h"
#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

using testing::Accumulators;
using testing::HalfRegisters;

// load_tile: rows [0, rows_valid) and columns [0, d) of the tensor rows starting at `first` (an
// element offset into `data`), zeros elsewhere; every 16-byte chunk at its swizzled place.
template <int D>
std::vector<float> load_tile(const TensorView& view, int64_t first, int rows, int rows_valid,
                             int64_t d) {
  std::vector<float> tile(static_cast<std::size_t>(rows * D), NAN);
  for (int row = 0; row < rows; ++row)
    for (int chunk = 0; chunk < D / 8; ++chunk) {
      const bool valid = row < rows_valid && chunk * 8 < d;
      for (int e = 0; e < 8; ++e) {
        tile[mma::tile_offset<D>(row, chunk * 8 + e)] =
            valid
                ? load_as_fp32(view.dtype, view.data, first + row * view.row_stride + chunk * 8 + e)
                : 0.0f;
      }
    }
  return tile;
}

template <int D>
std::array<int, 32> x4_offsets(mma::Coord (*address)(int), int row0, int col0) {
  std::array<int, 32> offsets{};
  for (int lane = 0; lane < 32; ++lane) {
    const mma::Coord at = address(lane);
    offsets[lane] = mma::tile_offset<D>(row0 + at.row, col0 + at.col);
  }
  REQUIRE(testing::ldmatrix_conflict_free(offsets));
  return offsets;
}

// The kernel's work for one (batch, head, query block), writing O (in the dtype) through `o`.
template <int D>
void emulate_block(const Shape& s, float scale, const AttentionViews& t, int64_t batch,
                   int64_t head, int64_t query_block) {
  constexpr int kKeyBlocks = mma::kBlockKeys / 8, kDBlocks = D / 8;
  const int64_t kv_head = head / s.group_size();
  const int64_t q0 = query_block * mma::kBlockRows;
  const float scale_log2 = scale * launch::kLog2e;
  const int64_t tiles = mma::kv_tiles(query_block, s.seq_q, s.seq_kv, s.causal);

  std::vector<float> q_tile =
      load_tile<D>(t.q, t.q.offset(batch, head, q0), mma::kBlockRows,
                   static_cast<int>(std::min<int64_t>(mma::kBlockRows, s.seq_q - q0)), s.d_k);
  for (int warp = 0; warp < mma::kWarps; ++warp) {
    const int64_t warp_row0 = q0 + warp * mma::kWarpRows;
    std::vector<HalfRegisters> q_fragments(D / 16);
    for (int kk = 0; kk < D / 16; ++kk) {
      q_fragments[kk] = testing::ldmatrix_x4(
          q_tile, x4_offsets<D>(mma::row_major_x4_address, warp * mma::kWarpRows, 16 * kk), false);
    }
    std::vector<Accumulators> o_acc(kDBlocks, Accumulators{});
    float row_max[32][2], row_sum[32][2];
    int visible[32][2];
    for (int lane = 0; lane < 32; ++lane)
      for (int h = 0; h < 2; ++h) {
        row_max[lane][h] = -INFINITY;
        row_sum[lane][h] = 0.0f;
        visible[lane][h] = static_cast<int>(launch::visible_keys(
            warp_row0 + mma::c_coord(lane, 2 * h).row, s.seq_q, s.seq_kv, s.causal));
      }

    for (int64_t tile = 0; tile < tiles; ++tile) {
      const int64_t kv0 = tile * mma::kBlockKeys;
      const int keys_valid = static_cast<int>(std::min<int64_t>(mma::kBlockKeys, s.seq_kv - kv0));
      const std::vector<float> k_tile =
          load_tile<D>(t.k, t.k.offset(batch, kv_head, kv0), mma::kBlockKeys, keys_valid, s.d_k);
      const std::vector<float> v_tile =
          load_tile<D>(t.v, t.v.offset(batch, kv_head, kv0), mma::kBlockKeys, keys_valid, s.d_v);
      // S = Q Kᵀ.
      std::vector<Accumulators> scores(kKeyBlocks, Accumulators{});
      for (int kk = 0; kk < D / 16; ++kk)
        for (int pair = 0; pair < kKeyBlocks / 2; ++pair) {
          const HalfRegisters b = testing::ldmatrix_x4(
              k_tile, x4_offsets<D>(mma::column_major_x4_address, 16 * pair, 16 * kk), false);
          testing::mma_m16n8k16(scores[2 * pair], q_fragments[kk], testing::b_fragment(b, 0));
          testing::mma_m16n8k16(scores[2 * pair + 1], q_fragments[kk], testing::b_fragment(b, 2));
        }
      // Scale and mask.
      const bool needs_mask = mma::tile_needs_mask(kv0, warp_row0, s.seq_q, s.seq_kv, s.causal);
      for (int j = 0; j < kKeyBlocks; ++j)
        for (int lane = 0; lane < 32; ++lane)
          for (int r = 0; r < 4; ++r) {
            float& score = scores[j][lane][r];
            score *= scale_log2;
            if (needs_mask && !mma::score_visible(static_cast<int>(kv0), j, lane, r,
                                                  visible[lane][0], visible[lane][1])) {
              score = -INFINITY;
            }
          }
      // Online softmax; the shuffles over lane bits 0 and 1 are a max over the lane's quad.
      for (int h = 0; h < 2; ++h) {
        float lane_max[32];
        for (int lane = 0; lane < 32; ++lane) {
          lane_max[lane] = -INFINITY;
          for (int j = 0; j < kKeyBlocks; ++j) {
            lane_max[lane] = std::fmax(
                lane_max[lane], std::fmax(scores[j][lane][2 * h], scores[j][lane][2 * h + 1]));
          }
        }
        for (int lane = 0; lane < 32; ++lane) {
          const int quad = lane & ~3;
          const float tile_max = std::fmax(std::fmax(lane_max[quad], lane_max[quad + 1]),
                                           std::fmax(lane_max[quad + 2], lane_max[quad + 3]));
          const launch::OnlineStep step = launch::online_step(row_max[lane][h], tile_max);
          row_max[lane][h] = step.max;
          float sum = 0.0f;
          for (int j = 0; j < kKeyBlocks; ++j)
            for (int e = 0; e < 2; ++e) {
              float& p = scores[j][lane][2 * h + e];
              p = std::exp2(p - step.base);
              sum += p;
            }
          row_sum[lane][h] = row_sum[lane][h] * step.alpha + sum;
          for (int n = 0; n < kDBlocks; ++n) {
            o_acc[n][lane][2 * h] *= step.alpha;
            o_acc[n][lane][2 * h + 1] *= step.alpha;
          }
        }
      }
      // O += P V, P's A fragment packed from S's accumulators, rounded to the dtype.
      for (int kk = 0; kk < mma::kBlockKeys / 16; ++kk) {
        HalfRegisters a{};
        for (int lane = 0; lane < 32; ++lane)
          for (int r = 0; r < 4; ++r)
            for (int e = 0; e < 2; ++e) {
              a[lane][r][e] = round_to(
                  s.dtype,
                  scores[2 * kk + mma::c_block_of_a(r)][lane][mma::c_register_of_a(r) + e]);
            }
        for (int pair = 0; pair < kDBlocks / 2; ++pair) {
          const HalfRegisters b = testing::ldmatrix_x4(
              v_tile, x4_offsets<D>(mma::row_major_x4_address, 16 * kk, 16 * pair), true);
          testing::mma_m16n8k16(o_acc[2 * pair], a, testing::b_fragment(b, 0));
          testing::mma_m16n8k16(o_acc[2 * pair + 1], a, testing::b_fragment(b, 2));
        }
      }
    }

    // Normalise, stage in the warp's rows of the Q tile, write 16 bytes at a time.
    float* o_tile = q_tile.data() + warp * mma::kWarpRows * D;
    for (int lane = 0; lane < 32; ++lane)
      for (int h = 0; h < 2; ++h) {
        const int quad = lane & ~3;
        const float total = (row_sum[quad][h] + row_sum[quad + 1][h]) +
                            (row_sum[quad + 2][h] + row_sum[quad + 3][h]);
        const float inverse = total > 0.0f ? 1.0f / total : 0.0f;
        for (int n = 0; n < kDBlocks; ++n) {
          const mma::Coord at = mma::c_coord(lane, 2 * h);
          for (int e = 0; e < 2; ++e) {
            o_tile[mma::tile_offset<D>(at.row, 8 * n + at.col + e)] =
                round_to(s.dtype, o_acc[n][lane][2 * h + e] * inverse);
          }
        }
      }
    for (int i = 0; i < mma::kWarpRows * D / 8; ++i) {
      const int row = i / (D / 8), chunk = i % (D / 8);
      if (warp_row0 + row >= s.seq_q || chunk * 8 >= s.d_v) continue;
      for (int e = 0; e < 8; ++e) {
        store_from_fp32(s.dtype, t.o.data, t.o.offset(batch, head, warp_row0 + row) + chunk * 8 + e,
                        o_tile[mma::tile_offset<D>(row, chunk * 8 + e)]);
      }
    }
  }
}

// The whole launch, emulated: every block of the grid. Returns O as fp32 in bhsd order.
std::vector<float> emulate_flash_tc(const HostTensors& inputs, float scale) {
  const Shape& s = inputs.shape;
  const PackedInputs packed = pack_inputs(inputs);
  std::vector<std::byte> o_bytes(static_cast<std::size_t>(s.o_elements() * element_bytes(s.dtype)));
  // Poisoned like the executor does: an element the kernel does not write fails the oracle.
  std::vector<float> nan_values(static_cast<std::size_t>(s.o_elements()), NAN);
  narrow_from_fp32(s.dtype, nan_values.data(), o_bytes.data(), s.o_elements());
  const AttentionViews views =
      make_views(s, packed.q.data(), packed.k.data(), packed.v.data(), o_bytes.data());
  const bool d128 = std::max(s.d_k, s.d_v) > 64;
  for (int64_t batch = 0; batch < s.batch; ++batch)
    for (int64_t head = 0; head < s.heads; ++head)
      for (int64_t block = 0; block < launch::ceil_div(s.seq_q, mma::kBlockRows); ++block) {
        if (d128) {
          emulate_block<128>(s, scale, views, batch, head, block);
        } else {
          emulate_block<64>(s, scale, views, batch, head, block);
        }
      }
  std::vector<float> o;
  unpack_tensor(o_bytes.data(), s.dtype, s.layout, s.batch, s.heads, s.seq_q, s.d_v, o);
  return o;
}

TEST_CASE("flash_tc's tile algorithm, emulated on the host, matches the oracle",
          "[cuda][mma][emulation]") {
  using testing::make_shape;
  struct Case {
    const char* name;
    Shape shape;
  };
  const std::vector<Case> cases = {
      {"seq not a multiple of any tile", make_shape(1, 2, 2, 131, 131, 64, 64, false)},
      {"causal square d 128", make_shape(1, 2, 2, 129, 129, 128, 128, true)},
      {"causal seq_q < seq_kv, GQA 8/2", make_shape(1, 8, 2, 45, 200, 64, 64, true)},
      {"causal decode seq_q 1", make_shape(1, 2, 2, 1, 77, 64, 64, true)},
      {"seq 1", make_shape(1, 1, 1, 1, 1, 64, 64, false)},
      {"seq_q > seq_kv", make_shape(2, 1, 1, 150, 23, 64, 64, false)},
      {"d_k 128, d_v 64", make_shape(1, 2, 1, 65, 70, 128, 64, false)},
      {"d_k 64, d_v 128, MQA causal", make_shape(1, 4, 1, 70, 70, 64, 128, true)},
  };
  for (const DType dtype : {DType::bf16, DType::fp16})
    for (const Layout layout : all_layouts())
      for (Case c : cases) {
        c.shape.dtype = dtype;
        c.shape.layout = layout;
        for (const Distribution distribution : all_distributions()) {
          const uint64_t seed = 1234;
          const HostTensors inputs = make_inputs(c.shape, distribution, seed);
          const float scale = default_scale(c.shape);
          const std::vector<float> o = emulate_flash_tc(inputs, scale);
          const OracleReport report =
              check_against_reference(inputs, scale, o, nullptr, Precision::fp32, OracleOptions{});
          INFO(fmt::format("{} ({}), {} inputs: rel L2 {:.3g} (tolerance {:.3g}), max abs {:.3g}",
                           c.name, describe(c.shape), to_string(distribution), report.rel_l2_err,
                           report.rel_l2_tolerance, report.max_abs_err));
          INFO(report.failure);
          CHECK(report.passed);
        }
      }
}

}  // namespace
}  // namespace attnbench
