// chunked: the fourth rung, the memory-efficient attention of Rabe & Staats (2021, "Self-attention
// does not need O(n^2) memory"). openmp still writes a whole row of seq_kv scores before its
// softmax. Here each block of query rows walks the keys and values in chunks of kChunkKv and keeps,
// per row, only a running max m, a running sum l of exp(s - m) and an unnormalised output
// accumulator a. A chunk's scores s give m' = max(m, max s); the old state is rescaled by
// exp(m - m') (only when the max grew), then l += sum exp(s - m') and a += exp(s - m') V_chunk;
// at the end O = a / l. The result is the exact softmax, but a score row never exists in full, so
// scratch is a chunk of scores and a chunk of Kᵀ per thread, whatever seq_kv is. The weights are
// never formed, so this variant cannot return them. Parallel with OpenMP over (batch, head, query
// block), with openmp's register-tiled kernels and vectorised exp; causal chunks wholly above the
// diagonal are skipped.
// Time: 2 * seq_q * seq_kv * (d_k + d_v) flops per head, plus one rescale of a per chunk in which
// a row's max grows; Kᵀ is rebuilt per (query block, chunk), 1/kTileQ of the score work.
// Memory: per thread, kTileQ x (kChunkKv + d_v) + d_k x kChunkKv floats: O(chunk * d), independent
// of seq_kv.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "harness/variant/parallel_errors.h"
#include "harness/variant/registry.h"
#include "variants/cpu/register_tiles.h"

namespace attnbench {
namespace {

// Sizes, against 32 KiB of L1d and 1 MiB of L2 per core (fp32, d = 64 as the usual case):
// - kRowBlock x kPanel, the register tile shared with openmp (6 query rows x 16 floats), is in
//   register_tiles.h.
// - kChunkKv keys per chunk: the chunk's Kᵀ (d_k x kChunkKv = 16 KiB at d_k = 64) and V
//   (kChunkKv x d_v, 16 KiB) stay in L1 while the block's row groups pass over them.
// - kTileQ query rows per task (16 row groups): rebuilding Kᵀ for every chunk costs one move per
//   key element per task, so a tall block keeps it to 1/96 of the score work; the block's Q rows
//   (24 KiB), score chunk (24 KiB) and accumulators (24 KiB) sit in L2 beside the chunk.
constexpr int64_t kChunkKv = 64;
// A query block whose accumulator a passed float's range is computed again with every exp(s - m)
// times kOverflowFactor (2^-64, exact: a power of two). O, a convex combination of V's rows, fits
// in float wherever V does; a, a sum of up to seq_kv terms p V with p <= 1, passes it for V within
// a factor seq_kv of float's largest values. Scaled so, a stays below seq_kv * 2^64, and only
// terms 2^-62 below a row's largest leave the sums.
constexpr float kOverflowFactor = 0x1p-64f;
constexpr int64_t kTileQ = 16 * cpu_kernels::kRowBlock;

class ChunkedVariant final : public Variant {
 public:
  VariantInfo info() const override {
    VariantInfo info;
    info.name = "chunked";
    info.device = Device::cpu;
    info.summary = "Rabe & Staats: key/value chunks, online softmax; O(chunk x d) memory; OpenMP";
    info.capabilities.causal = true;
    info.capabilities.gqa = true;
    info.capabilities.returns_weights = false;
    return info;
  }

  std::size_t workspace_bytes(const Shape& s) const override {
    const auto threads = static_cast<int64_t>(omp_get_max_threads());
    return static_cast<std::size_t>(threads * Scratch::floats(s)) * sizeof(float);
  }

  void prepare(const Shape& s, Workspace& workspace) override {
    refuse_unsupported(info(), s);
    threads_ = omp_get_max_threads();
    const auto per_thread = [&](int64_t floats) {
      return workspace.allocate_array<float>(static_cast<std::size_t>(threads_ * floats));
    };
    keys_t_ = per_thread(Scratch::keys_t_floats(s));
    probabilities_ = per_thread(Scratch::probabilities_floats(s));
    accumulators_ = per_thread(Scratch::accumulator_floats(s));
    row_max_ = per_thread(Scratch::row_floats(s));
    row_sum_ = per_thread(Scratch::row_floats(s));
  }

  void run(const Problem& p) override {
    const Shape& s = p.shape;
    const int64_t q_blocks = (s.seq_q + kTileQ - 1) / kTileQ;
    const int64_t tasks = s.batch * s.heads * q_blocks;
    // One flat index over (batch, head, query block) rather than collapse(3): the decoding is
    // explicit. Schedule dynamic: with a causal mask a block's cost grows with its position, so
    // a static split would leave the thread holding the first blocks idle at the end; a task
    // (96 rows x seq_kv x (d_k + d_v) x 2 flops) dwarfs the cost of handing it out.
    ParallelErrors errors;
#pragma omp parallel for schedule(dynamic) num_threads(threads_)
    for (int64_t task = 0; task < tasks; ++task) {
      errors.capture([&] {
        const int64_t head_index = task / q_blocks;  // b * heads + h
        const int64_t b = head_index / s.heads;
        const int64_t q_begin = task % q_blocks * kTileQ;
        const int64_t thread = omp_get_thread_num();
        const HeadView<float> head = p.head<float>(b, head_index % s.heads);
        Block block;
        block.q = head.q + q_begin * s.d_k;
        block.k = head.k;
        block.v = head.v;
        block.o = head.o + q_begin * s.d_v;
        block.keys_t = keys_t_ + thread * Scratch::keys_t_floats(s);
        block.probabilities = probabilities_ + thread * Scratch::probabilities_floats(s);
        block.accumulators = accumulators_ + thread * Scratch::accumulator_floats(s);
        block.row_max = row_max_ + thread * Scratch::row_floats(s);
        block.row_sum = row_sum_ + thread * Scratch::row_floats(s);
        query_block(s, p.scale, block, q_begin, std::min(q_begin + kTileQ, s.seq_q), 1.0f);
      });
    }
    errors.rethrow_first();
  }

 private:
  // Per-thread scratch sizes, each rounded to whole cache lines; none depends on seq_kv.
  struct Scratch {
    static int64_t rows(const Shape& s) { return std::min(kTileQ, s.seq_q); }
    static int64_t keys_t_floats(const Shape& s) {
      return cpu_kernels::round_up(s.d_k * kChunkKv, cpu_kernels::kFloatsPerLine);
    }
    static int64_t probabilities_floats(const Shape& s) {
      return cpu_kernels::round_up(rows(s) * kChunkKv, cpu_kernels::kFloatsPerLine);
    }
    static int64_t accumulator_floats(const Shape& s) {
      return cpu_kernels::round_up(rows(s) * s.d_v, cpu_kernels::kFloatsPerLine);
    }
    static int64_t row_floats(const Shape& s) {
      return cpu_kernels::round_up(rows(s), cpu_kernels::kFloatsPerLine);
    }
    static int64_t floats(const Shape& s) {
      return keys_t_floats(s) + probabilities_floats(s) + accumulator_floats(s) + 2 * row_floats(s);
    }
  };

  // One task's pointers: its query rows, its head's K and V, and its thread's scratch.
  struct Block {
    const float* q;  // the block's first query row
    const float* k;
    const float* v;
    float* o;              // the block's first output row
    float* keys_t;         // [d_k][kChunkKv]: the chunk's Kᵀ, zero past its last key
    float* probabilities;  // [rows][kChunkKv]: scores, then exp(s - m)
    float* accumulators;   // [rows][d_v]: a, the unnormalised output
    float* row_max;        // m per row
    float* row_sum;        // l per row
  };

  static void query_block(const Shape& s, float scale, const Block& block, int64_t q_begin,
                          int64_t q_end, float factor) {
    const int64_t rows = q_end - q_begin;
    std::fill(block.row_max, block.row_max + rows, -std::numeric_limits<float>::infinity());
    std::fill(block.row_sum, block.row_sum + rows, 0.0f);
    std::fill(block.accumulators, block.accumulators + rows * s.d_v, 0.0f);
    // The block's last row sees the most keys; chunks from kv_limit on are masked for every row.
    const int64_t kv_limit = s.visible_keys(q_end - 1);
    for (int64_t chunk_begin = 0; chunk_begin < kv_limit; chunk_begin += kChunkKv) {
      const int64_t width = std::min(kChunkKv, kv_limit - chunk_begin);
      pack_keys_t(s, block, chunk_begin, width);
      chunk_scores(s, scale, block, rows);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t visible =
            std::clamp<int64_t>(s.visible_keys(q_begin + r) - chunk_begin, 0, width);
        update_row(s, block, r, visible, width, factor);
      }
      chunk_values(s, block, q_begin, rows, chunk_begin, width);
    }
    const float* accumulators = block.accumulators;
    const float* accumulators_end = accumulators + rows * s.d_v;
    if (factor == 1.0f &&
        !std::all_of(accumulators, accumulators_end, [](float a) { return std::isfinite(a); })) {
      query_block(s, scale, block, q_begin, q_end, kOverflowFactor);
      return;
    }
    for (int64_t r = 0; r < rows; ++r) {
      const float inverse = 1.0f / block.row_sum[r];
      const float* acc = block.accumulators + r * s.d_v;
      float* out = block.o + r * s.d_v;
      // Within float's range: the quotient of two rounded sums may round past a V at float's
      // largest value (flash_cpu's within_float_range).
      constexpr float kLargest = std::numeric_limits<float>::max();
#pragma omp simd
      for (int64_t c = 0; c < s.d_v; ++c)
        out[c] = std::clamp(acc[c] * inverse, -kLargest, kLargest);
    }
  }

  // keys_t[c][j] = k[chunk_begin + j][c], zero for the columns past the chunk's last key.
  static void pack_keys_t(const Shape& s, const Block& block, int64_t chunk_begin, int64_t width) {
    for (int64_t j = 0; j < width; ++j) {
      const float* key = block.k + (chunk_begin + j) * s.d_k;
      for (int64_t c = 0; c < s.d_k; ++c) block.keys_t[c * kChunkKv + j] = key[c];
    }
    if (width == kChunkKv) return;
    for (int64_t c = 0; c < s.d_k; ++c) {
      std::fill(block.keys_t + c * kChunkKv + width, block.keys_t + (c + 1) * kChunkKv, 0.0f);
    }
  }

  static void chunk_scores(const Shape& s, float scale, const Block& block, int64_t rows) {
    for (int64_t r = 0; r < rows; r += cpu_kernels::kRowBlock) {
      const float* q = block.q + r * s.d_k;
      float* out = block.probabilities + r * kChunkKv;
      // A whole chunk of scores: Kᵀ rows and score rows are both kChunkKv apart.
      const int64_t group = std::min<int64_t>(cpu_kernels::kRowBlock, rows - r);
      cpu_kernels::with_row_count(group, [&](auto group_rows) {
        cpu_kernels::score_tile<group_rows.value, kChunkKv>(q, s.d_k, block.keys_t, kChunkKv, scale,
                                                            out, kChunkKv);
      });
    }
  }

  // The online softmax step for row r, whose first `visible` keys of this chunk are unmasked:
  // its scores become exp(s - m') times `factor` (1, or kOverflowFactor) (0 where masked), and m,
  // l and a move to the new max m'.
  static void update_row(const Shape& s, const Block& block, int64_t r, int64_t visible,
                         int64_t width, float factor) {
    float* row = block.probabilities + r * kChunkKv;
    std::fill(row + visible, row + width, 0.0f);
    if (visible == 0) return;  // the whole chunk is masked for this row: nothing changes
    const float old_max = block.row_max[r];
    const float new_max = std::max(old_max, cpu_kernels::row_max(row, visible));
    float chunk_sum = cpu_kernels::exp_shifted(row, visible, new_max);
    if (factor != 1.0f) {
      for (int64_t j = 0; j < visible; ++j) row[j] *= factor;
      chunk_sum *= factor;
    }
    if (new_max > old_max) {
      // The terms so far were relative to the old max: rescale them. On the first chunk the old
      // max is -inf, the factor is 0 and the state is still empty.
      const float correction = std::exp(old_max - new_max);
      block.row_sum[r] *= correction;
      float* acc = block.accumulators + r * s.d_v;
#pragma omp simd
      for (int64_t c = 0; c < s.d_v; ++c) acc[c] *= correction;
    }
    block.row_sum[r] += chunk_sum;
    block.row_max[r] = new_max;
  }

  // a += P_chunk V_chunk. Masked probabilities are 0, so each row group runs to its last row's
  // limit.
  static void chunk_values(const Shape& s, const Block& block, int64_t q_begin, int64_t rows,
                           int64_t chunk_begin, int64_t width) {
    const float* v = block.v + chunk_begin * s.d_v;
    for (int64_t r = 0; r < rows; r += cpu_kernels::kRowBlock) {
      const int64_t group = std::min<int64_t>(cpu_kernels::kRowBlock, rows - r);
      const int64_t keys =
          std::clamp<int64_t>(s.visible_keys(q_begin + r + group - 1) - chunk_begin, 0, width);
      if (keys == 0) continue;
      const float* p = block.probabilities + r * kChunkKv;
      float* acc = block.accumulators + r * s.d_v;
      cpu_kernels::with_row_count(group, [&](auto group_rows) {
        cpu_kernels::add_weighted_values<group_rows.value>(p, kChunkKv, v, s.d_v, keys, acc);
      });
    }
  }

  int threads_ = 1;
  float* keys_t_ = nullptr;
  float* probabilities_ = nullptr;
  float* accumulators_ = nullptr;
  float* row_max_ = nullptr;
  float* row_sum_ = nullptr;
};

}  // namespace

ATTNBENCH_REGISTER_VARIANT(ChunkedVariant);

}  // namespace attnbench
