// flash_tc's tile algorithm run on the host, step for step as the kernel does it, and compared
// with the float64 oracle at the bf16/fp16 tolerance: the best check there is without a GPU.
// Inputs are packed in the case's dtype and layout and read through the same strides; tiles are
// copied into swizzled emulated shared memory (mma::tile_offset, zero-filled like cp.async);
// fragments come from the kernel's ldmatrix addresses through an emulated ldmatrix; products go
// through an emulated mma.sync that places elements by the PTX fragment maps; the mask, tile
// skipping, online softmax (launch::online_step), quad shuffles, P rounded to the dtype in the
// A-fragment registers, the normalisation and the staged 16-byte O stores follow the kernel; so do
// the masks (the block's tile loop, each warp's skipped, unmasked and masked tiles, mask_math.h)
// and the score modifiers, in log2 units.
// What this cannot see: races, the cp.async group accounting, and what the hardware does that the
// PTX description does not say.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "harness/core/element_types.h"
#include "harness/core/tensor.h"
#include "harness/cuda/mask_math.h"
#include "harness/cuda/mma_fragments.h"
#include "harness/measure/checked_run.h"
#include "harness/measure/inputs.h"
#include "harness/measure/oracle.h"
#include "harness/measure/tensor_packing.h"
#include "tests/cuda/mma_emulation.h"
#include "tests/edge_shapes.h"
#include "variants/cuda/flash_tc_tile_order.h"
#include "variants/cuda/flash_tc_traits.h"

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

// ex2.approx.ftz.f32 as the kernel uses it: results under the smallest normal float are zero.
float exp2_flush_denormals(float x) {
  const float y = std::exp2(x);
  return y < std::numeric_limits<float>::min() ? 0.0f : y;
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
  constexpr int kKeyBlocks = flash_tc::kBlockKeys / 8, kDBlocks = D / 8;
  const int64_t kv_head = head / s.group_size();
  const int64_t q0 = query_block * flash_tc::kBlockRows;
  const float scale_log2 = scale * launch::kLog2e;
  const std::vector<int> document_starts = mask_math::document_starts(s.mask);
  const mask_math::DeviceMask mask = mask_math::make_device_mask(s, document_starts.data());
  const mask_math::ScoreModifiers modifiers = mask_math::make_modifiers(s);
  const bool scaled_first =
      flash_tc::scores_scaled_first(mask_math::any_modifier(modifiers), scale_log2);
  const float exponent_scale = scaled_first ? 1.0f : scale_log2;  // the kernel's
  const float slope_log2 = modifiers.alibi ? mask_math::alibi_slope_log2(static_cast<int>(head),
                                                                         static_cast<int>(s.heads))
                                           : 0.0f;
  const flash_tc::TileOrder order = flash_tc::tile_order(mask_math::block_tiles(
      mask_math::block_keys(mask, static_cast<int>(q0), flash_tc::kBlockRows),
      flash_tc::kBlockKeys));

  std::vector<float> q_tile =
      load_tile<D>(t.q, t.q.offset(batch, head, q0), flash_tc::kBlockRows,
                   static_cast<int>(std::min<int64_t>(flash_tc::kBlockRows, s.seq_q - q0)), s.d_k);
  for (int warp = 0; warp < flash_tc::kWarps; ++warp) {
    const int64_t warp_row0 = q0 + warp * flash_tc::kWarpRows;
    const mask_math::BlockTiles warp_tiles = mask_math::block_tiles(
        mask_math::block_keys(mask, static_cast<int>(warp_row0), flash_tc::kWarpRows),
        flash_tc::kBlockKeys);
    std::vector<HalfRegisters> q_fragments(D / 16);
    for (int kk = 0; kk < D / 16; ++kk) {
      q_fragments[kk] = testing::ldmatrix_x4(
          q_tile, x4_offsets<D>(mma::row_major_x4_address, warp * flash_tc::kWarpRows, 16 * kk),
          false);
    }
    std::vector<Accumulators> o_acc(kDBlocks, Accumulators{});
    float row_max[32][2], row_sum[32][2];
    mask_math::KeySpan keys[32][2];
    for (int lane = 0; lane < 32; ++lane)
      for (int h = 0; h < 2; ++h) {
        row_max[lane][h] = -INFINITY;
        row_sum[lane][h] = 0.0f;
        keys[lane][h] =
            mask_math::row_keys(mask, static_cast<int>(warp_row0 + mma::c_coord(lane, 2 * h).row));
      }

    // The masked tiles first, then the unmasked run, which the kernel computes with no tile
    // test and no mask: each warp with rows must see those tiles in full (a warp wholly past
    // seq_q computes them on its zero Q rows, and stores nothing).
    for (int position = 0; position < order.steps(); ++position) {
      const int tile = order.tile_at(position);
      const int64_t kv0 = int64_t{tile} * flash_tc::kBlockKeys;
      // The scaled-first kernel runs every tile through the masked body.
      const bool masked_loop = scaled_first || position < order.masked_steps();
      if (!masked_loop && warp_row0 < s.seq_q) {
        REQUIRE(mask_math::classify(warp_tiles, tile) == TileVisibility::fully_visible);
      }
      // In the masked loop, a warp that sees no key of the tile skips it.
      const TileVisibility visibility =
          masked_loop ? mask_math::classify(warp_tiles, tile) : TileVisibility::fully_visible;
      if (visibility == TileVisibility::fully_masked) continue;
      const int keys_valid =
          static_cast<int>(std::min<int64_t>(flash_tc::kBlockKeys, s.seq_kv - kv0));
      const std::vector<float> k_tile = load_tile<D>(t.k, t.k.offset(batch, kv_head, kv0),
                                                     flash_tc::kBlockKeys, keys_valid, s.d_k);
      const std::vector<float> v_tile = load_tile<D>(t.v, t.v.offset(batch, kv_head, kv0),
                                                     flash_tc::kBlockKeys, keys_valid, s.d_v);
      // S = Q Kᵀ.
      std::vector<Accumulators> scores(kKeyBlocks, Accumulators{});
      for (int kk = 0; kk < D / 16; ++kk)
        for (int pair = 0; pair < kKeyBlocks / 2; ++pair) {
          const HalfRegisters b = testing::ldmatrix_x4(
              k_tile, x4_offsets<D>(mma::column_major_x4_address, 16 * pair, 16 * kk), false);
          testing::mma_m16n8k16(scores[2 * pair], q_fragments[kk], testing::b_fragment(b, 0));
          testing::mma_m16n8k16(scores[2 * pair + 1], q_fragments[kk], testing::b_fragment(b, 2));
        }
      // Scale and modify (or leave the scale to the exponent), and mask.
      const bool partial = visibility == TileVisibility::partial;
      for (int j = 0; j < kKeyBlocks; ++j)
        for (int lane = 0; lane < 32; ++lane)
          for (int r = 0; r < 4; ++r) {
            float& score = scores[j][lane][r];
            if (scaled_first) {
              score *= scale_log2;
              const mma::Coord at = mma::c_coord(lane, r);
              score = mask_math::modify_score(
                  score, modifiers, slope_log2,
                  static_cast<int>(warp_row0 + at.row + (s.seq_kv - s.seq_q)),
                  static_cast<int>(kv0 + 8 * j + at.col));
            }
            if (partial && !mma::score_visible(static_cast<int>(kv0), j, lane, r, keys[lane][0],
                                               keys[lane][1])) {
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
          const launch::OnlineStep step =
              launch::online_step(row_max[lane][h], tile_max * exponent_scale);
          row_max[lane][h] = step.max;
          float sum = 0.0f;
          for (int j = 0; j < kKeyBlocks; ++j)
            for (int e = 0; e < 2; ++e) {
              float& p = scores[j][lane][2 * h + e];
              p = exp2_flush_denormals(std::fma(p, exponent_scale, -step.base));
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
      for (int kk = 0; kk < flash_tc::kBlockKeys / 16; ++kk) {
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
    float* o_tile = q_tile.data() + warp * flash_tc::kWarpRows * D;
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
    for (int i = 0; i < flash_tc::kWarpRows * D / 8; ++i) {
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
      for (int64_t block = 0; block < launch::ceil_div(s.seq_q, flash_tc::kBlockRows); ++block) {
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

TEST_CASE("flash_tc folds a positive scale into the exponent, and scales other scores first",
          "[cuda][mma][emulation]") {
  CHECK_FALSE(flash_tc::scores_scaled_first(false, 0.18f));
  CHECK(flash_tc::scores_scaled_first(true, 0.18f));  // soft-capping and ALiBi read log2 units
  CHECK(flash_tc::scores_scaled_first(false, -0.18f));
  CHECK(flash_tc::scores_scaled_first(false, 0.0f));
  CHECK(flash_tc::scores_scaled_first(false, NAN));
  // Each way through the emulated kernel against the oracle: a negative or zero scale flips or
  // flattens the softmax, where the unscaled max would be the wrong one.
  const Shape causal = testing::make_shape(1, 2, 2, 100, 130, 64, 64, true);
  for (const float scale : {0.125f, 2.0f, -0.125f, 0.0f})
    for (const DType dtype : {DType::bf16, DType::fp16}) {
      Shape shape = causal;
      shape.dtype = dtype;
      const HostTensors inputs = make_inputs(shape, Distribution::normal, 5);
      const std::vector<float> o = emulate_flash_tc(inputs, scale);
      const OracleReport report =
          check_against_reference(inputs, scale, o, nullptr, Precision::fp32, OracleOptions{});
      INFO(fmt::format("scale {} ({}): rel L2 {:.3g} (tolerance {:.3g})", scale, describe(shape),
                       report.rel_l2_err, report.rel_l2_tolerance));
      INFO(report.failure);
      CHECK(report.passed);
    }
}

TEST_CASE("flash_tc's tile algorithm, emulated on the host, takes every mask and modifier",
          "[cuda][mma][emulation][mask]") {
  // The masked edge shapes every variant is tried on, at the head dimensions flash_tc takes, and
  // masks whose tiles fall every way: windows narrower and wider than a 64-key tile, documents
  // of uneven lengths crossing tile and warp edges, seq_q != seq_kv (where no row is left without a
  // key: validate() refuses that).
  std::vector<testing::NamedShape> shapes = testing::masked_edge_shapes();
  using testing::make_shape;
  using testing::with_mask;
  shapes.push_back({"window:16 seq_q 300 < seq_kv 400",
                    with_mask(make_shape(1, 2, 2, 300, 400, 64, 64, false), MaskSpec::window(16))});
  shapes.push_back(
      {"window:130 seq_q 100 < seq_kv 350",
       with_mask(make_shape(1, 2, 1, 100, 350, 64, 64, false), MaskSpec::window(130))});
  shapes.push_back({"prefix:70 seq_q 90 > seq_kv 80",
                    with_mask(make_shape(1, 2, 2, 90, 80, 128, 128, false), MaskSpec::prefix(70))});
  shapes.push_back(
      {"causal seq_q 100 < seq_kv 170 alibi",
       with_mask(make_shape(1, 4, 2, 100, 170, 64, 64, false), MaskSpec::causal(), true)});
  shapes.push_back({"documents 3,61,1,90,45,10 softcap:20 d 128",
                    with_mask(make_shape(1, 2, 2, 210, 210, 128, 128, false),
                              MaskSpec::documents({3, 61, 1, 90, 45, 10}), false, 20)});
  shapes.push_back({"documents:16 drawn alibi",
                    with_mask(make_shape(1, 4, 4, 257, 257, 64, 64, false),
                              MaskSpec::documents(draw_document_lengths(257, 16, 7)), true)});
  const std::vector<DType> dtypes = {DType::bf16, DType::fp16};
  for (std::size_t index = 0; index < shapes.size(); ++index) {
    testing::NamedShape named = shapes[index];
    Shape& shape = named.shape;
    // flash_tc is built for d 64 and 128: the other edge shapes' d becomes 64.
    if (shape.d_k != 64 && shape.d_k != 128) shape.d_k = 64;
    if (shape.d_v != 64 && shape.d_v != 128) shape.d_v = 64;
    // Each shape in one dtype and layout, taken in turn: the whole product is slow on the host.
    shape.dtype = dtypes[index % 2];
    shape.layout = all_layouts()[(index / 2) % all_layouts().size()];
    INFO(named.name << " (" << describe(shape) << ")");
    REQUIRE(validate(shape).empty());
    const uint64_t seed = 99 + index;
    const HostTensors inputs = make_inputs(shape, Distribution::normal, seed);
    const float scale = default_scale(shape);
    const std::vector<float> o = emulate_flash_tc(inputs, scale);
    const OracleReport report =
        check_against_reference(inputs, scale, o, nullptr, Precision::fp32, OracleOptions{});
    INFO(fmt::format("{} ({}): rel L2 {:.3g} (tolerance {:.3g}), max abs {:.3g}", named.name,
                     describe(shape), report.rel_l2_err, report.rel_l2_tolerance,
                     report.max_abs_err));
    INFO(report.failure);
    CHECK(report.passed);
  }
}

}  // namespace
}  // namespace attnbench
