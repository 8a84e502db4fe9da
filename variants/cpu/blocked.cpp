// blocked: the second rung. Same three steps as naive (scores, softmax, weights times V) and still
// one head's whole seq_q x seq_kv score matrix, but both matrix products walk the data in cache
// tiles and in an order whose innermost loop is contiguous. naive's Q Kᵀ is a dot product per score
// (a serial reduction the compiler may not vectorise) and its P V walks V down a column; here a
// tile of K is transposed into Kᵀ so each score row is a sum of scaled Kᵀ rows, and P V adds
// scaled V rows into an output row: both inner loops are unit-stride and vectorise, and every tile
// is reused from L1 by a whole tile of query rows instead of streaming from memory per row.
// Causal tiles that lie wholly above the diagonal are skipped. Single-threaded.
// Time: 2 * seq_q * seq_kv * (d_k + d_v) flops per head (fewer with the causal skip).
// Memory: one head's seq_q x seq_kv scores plus one d_k x kTileKv tile of Kᵀ: O(n^2) workspace.
#include <algorithm>
#include <cmath>

#include "harness/variant/registry.h"

namespace attnbench {
namespace {

// Tile sizes, against 32 KiB of L1d and 1 MiB of L2 per core (fp32, d = 64 as the usual case):
// - kTileKv keys: the Kᵀ tile is d_k x kTileKv floats = 16 KiB at d_k = 64 (32 KiB at 128), and
//   the matching V tile kTileKv x d_v the same; each stays in L1 while every row of the query tile
//   passes over it. 64 floats are whole SIMD vectors (8 of AVX2, 4 of AVX-512): no loop remainder.
// - kTileQ query rows: the query tile (16 KiB at d = 64), its kTileQ x kTileKv score block
//   (16 KiB) and the output rows (16 KiB) sit in L2 next to the Kᵀ and V tiles, ~64 KiB of the
//   1 MiB, so the tiles are loaded from memory once per (query tile, key tile) pair and reused
//   kTileQ (resp. kTileKv) times from cache.
constexpr int64_t kTileQ = 64;
constexpr int64_t kTileKv = 64;

class BlockedVariant final : public Variant {
 public:
  VariantInfo info() const override {
    VariantInfo info;
    info.name = "blocked";
    info.device = Device::cpu;
    info.summary = "cache-tiled, unit-stride matrix products; n x n scores of one head; 1 thread";
    info.capabilities.causal = true;
    info.capabilities.gqa = true;
    info.capabilities.returns_weights = true;
    return info;
  }

  std::size_t workspace_bytes(const Shape& s) const override {
    return (score_elements(s) + key_tile_elements(s)) * sizeof(float);
  }

  void prepare(const Shape& s, Workspace& workspace) override {
    refuse_unsupported(info(), s);
    scores_ = workspace.allocate_array<float>(score_elements(s));
    key_tile_ = workspace.allocate_array<float>(key_tile_elements(s));
  }

  void run(const Problem& p) override {
    const Shape& s = p.shape;
    for (int64_t b = 0; b < s.batch; ++b) {
      for (int64_t h = 0; h < s.heads; ++h) {
        const HeadView<float> head = p.head<float>(b, h);
        one_head(s, p.scale, head.q, head.k, head.v, head.o, head.weights);
      }
    }
  }

 private:
  static std::size_t score_elements(const Shape& s) {
    return static_cast<std::size_t>(s.seq_q * s.seq_kv);
  }
  static std::size_t key_tile_elements(const Shape& s) {
    return static_cast<std::size_t>(s.d_k * kTileKv);
  }

  void one_head(const Shape& s, float scale, const float* q, const float* k, const float* v,
                float* o, float* weights) const {
    for (int64_t q_begin = 0; q_begin < s.seq_q; q_begin += kTileQ) {
      const int64_t q_end = std::min(q_begin + kTileQ, s.seq_q);
      // The last row of the tile sees the most keys; key tiles past it are masked for all rows.
      const int64_t kv_limit = s.visible_keys(q_end - 1);
      scores(s, scale, q, k, q_begin, q_end, kv_limit);
      softmax_rows(s, q_begin, q_end);
      weighted_values(s, v, o, q_begin, q_end, kv_limit);
    }
    if (weights != nullptr) std::copy(scores_, scores_ + s.seq_q * s.seq_kv, weights);
  }

  // S[i][j] = scale * q_i . k_j for the tile's rows and keys j < kv_limit.
  void scores(const Shape& s, float scale, const float* q, const float* k, int64_t q_begin,
              int64_t q_end, int64_t kv_limit) const {
    for (int64_t kv_begin = 0; kv_begin < kv_limit; kv_begin += kTileKv) {
      const int64_t width = std::min(kTileKv, kv_limit - kv_begin);
      // Kᵀ tile: key_tile_[c][j] = k[kv_begin + j][c], zero past the last key.
      for (int64_t c = 0; c < s.d_k; ++c) {
        for (int64_t j = 0; j < kTileKv; ++j) {
          key_tile_[c * kTileKv + j] = j < width ? k[(kv_begin + j) * s.d_k + c] : 0.0f;
        }
      }
      for (int64_t i = q_begin; i < q_end; ++i) {
        // One row of scores is a sum of Kᵀ rows weighted by q_i: unit stride, no reduction.
        float row[kTileKv] = {};
        for (int64_t c = 0; c < s.d_k; ++c) {
          const float q_ic = q[i * s.d_k + c];
          const float* key_row = key_tile_ + c * kTileKv;
          for (int64_t j = 0; j < kTileKv; ++j) row[j] += q_ic * key_row[j];
        }
        float* out = scores_ + i * s.seq_kv + kv_begin;
        for (int64_t j = 0; j < width; ++j) out[j] = scale * row[j];
      }
    }
  }

  // Each row becomes softmax weights over its visible keys; every masked key gets exactly 0.
  void softmax_rows(const Shape& s, int64_t q_begin, int64_t q_end) const {
    for (int64_t i = q_begin; i < q_end; ++i) {
      float* row = scores_ + i * s.seq_kv;
      const int64_t visible = s.visible_keys(i);
      const float row_max = *std::max_element(row, row + visible);
      float sum = 0.0f;
      for (int64_t j = 0; j < visible; ++j) {
        row[j] = std::exp(row[j] - row_max);
        sum += row[j];
      }
      const float inverse = 1.0f / sum;
      for (int64_t j = 0; j < visible; ++j) row[j] *= inverse;
      std::fill(row + visible, row + s.seq_kv, 0.0f);
    }
  }

  // O[i] = sum_j P[i][j] * V[j], one V tile at a time so it is reused from L1 by all the rows.
  void weighted_values(const Shape& s, const float* v, float* o, int64_t q_begin, int64_t q_end,
                       int64_t kv_limit) const {
    std::fill(o + q_begin * s.d_v, o + q_end * s.d_v, 0.0f);
    for (int64_t kv_begin = 0; kv_begin < kv_limit; kv_begin += kTileKv) {
      const int64_t kv_end = std::min(kv_begin + kTileKv, kv_limit);
      for (int64_t i = q_begin; i < q_end; ++i) {
        const float* weights_row = scores_ + i * s.seq_kv;
        float* out = o + i * s.d_v;
        // Masked weights are 0 already; stopping at the row's own limit just saves the work.
        const int64_t row_end = std::min(kv_end, s.visible_keys(i));
        for (int64_t j = kv_begin; j < row_end; ++j) {
          const float weight = weights_row[j];
          const float* value_row = v + j * s.d_v;
          for (int64_t c = 0; c < s.d_v; ++c) out[c] += weight * value_row[c];
        }
      }
    }
  }

  float* scores_ = nullptr;
  float* key_tile_ = nullptr;
};

}  // namespace

ATTNBENCH_REGISTER_VARIANT(BlockedVariant);

}  // namespace attnbench
