// openmp: the third rung. blocked's tiles, spread over all cores and shaped for the SIMD units.
// Work is split into independent tasks, one per (batch, head, block of kTileQ query rows), shared
// among OpenMP threads; each thread owns the score rows of its query block (kTileQ x seq_kv), not
// a whole head's, so scratch grows with threads x n rather than n^2. Inside a task, both products
// run as small register-blocked kernels: kRowBlock query rows times one kPanel-wide strip of
// scores (or of output columns) stay in vector registers for the whole reduction, and each loaded
// Kᵀ or V vector feeds kRowBlock FMAs, where blocked reloads and stores its row every step. Kᵀ is
// built once per run for all heads (in parallel) instead of once per query tile. The softmax uses
// a polynomial exp the compiler vectorises (std::exp is a scalar call, and with the products
// vectorised it would cost about as much as they do). Causal key tiles wholly above the diagonal
// are skipped.
// Time: 2 * seq_q * seq_kv * (d_k + d_v) flops per head, divided over the threads.
// Memory: per thread, min(kTileQ, seq_q) x seq_kv scores; plus Kᵀ, the size of K. O(n).
#include <omp.h>

#include <algorithm>

#include "harness/variant/parallel_errors.h"
#include "harness/variant/registry.h"
#include "variants/cpu/register_tiles.h"

namespace attnbench {
namespace {

// Sizes, against 32 KiB of L1d and 1 MiB of L2 per core (fp32, d = 64 as the usual case):
// - kRowBlock x kPanel, the register tile (6 query rows x 16 floats), is in register_tiles.h.
// - kTileKv keys per tile: the Kᵀ slice (d_k x kTileKv = 16 KiB at d_k = 64) and the V tile
//   (kTileKv x d_v, 16 KiB) stay in L1 while every row group of the query block passes over them.
// - kTileQ query rows per task (8 row groups): the block's Q rows (12 KiB), output rows (12 KiB)
//   and score rows (kTileQ x seq_kv: 192 KiB at seq_kv = 1024) live in L2, and there are still
//   batch * heads * seq_q / 48 tasks to balance across the threads.
constexpr int64_t kTileKv = 64;
constexpr int64_t kTileQ = 8 * cpu_kernels::kRowBlock;

class OpenmpVariant final : public Variant {
 public:
  VariantInfo info() const override {
    VariantInfo info;
    info.name = "openmp";
    info.device = Device::cpu;
    info.summary = "OpenMP over (batch, head, query block); SIMD register tiles; weights";
    info.capabilities.causal = true;
    info.capabilities.gqa = true;
    info.capabilities.returns_weights = true;
    return info;
  }

  std::size_t workspace_bytes(const Shape& s) const override {
    const auto threads = static_cast<int64_t>(omp_get_max_threads());
    return static_cast<std::size_t>(threads * scores_per_thread(s) + keys_t_elements(s)) *
           sizeof(float);
  }

  void prepare(const Shape& s, Workspace& workspace) override {
    refuse_unsupported(info(), s);
    threads_ = omp_get_max_threads();
    scores_ =
        workspace.allocate_array<float>(static_cast<std::size_t>(threads_ * scores_per_thread(s)));
    keys_t_ = workspace.allocate_array<float>(static_cast<std::size_t>(keys_t_elements(s)));
  }

  void run(const Problem& p) override {
    const Shape& s = p.shape;
    const int64_t stride = kv_stride(s);
    const int64_t kv_tiles = stride / kTileKv;
    const int64_t q_blocks = (s.seq_q + kTileQ - 1) / kTileQ;
    const int64_t tasks = s.batch * s.heads * q_blocks;
    ParallelErrors errors;
#pragma omp parallel num_threads(threads_)
    {
      // Kᵀ of every key/value head, zero-padded to whole tiles, shared by all the query heads
      // and blocks that read it. Each element moves once per run; the implicit barrier at the
      // end of this loop orders it before the tasks.
#pragma omp for schedule(static)
      for (int64_t tile = 0; tile < s.batch * s.kv_heads * kv_tiles; ++tile) {
        errors.capture([&] {
          const int64_t kv_index = tile / kv_tiles;  // b * kv_heads + kv head
          const int64_t kv_begin = tile % kv_tiles * kTileKv;
          const float* k =
              p.tensors.k.row<const float>(kv_index / s.kv_heads, kv_index % s.kv_heads, 0);
          float* keys_t = keys_t_ + kv_index * s.d_k * stride;
          const int64_t width = std::min(kTileKv, s.seq_kv - kv_begin);
          for (int64_t j = kv_begin; j < kv_begin + width; ++j) {
            for (int64_t c = 0; c < s.d_k; ++c) keys_t[c * stride + j] = k[j * s.d_k + c];
          }
          for (int64_t c = 0; c < s.d_k; ++c) {
            std::fill(keys_t + c * stride + kv_begin + width,
                      keys_t + c * stride + kv_begin + kTileKv, 0.0f);
          }
        });
      }
      // One flat index over (batch, head, query block) rather than collapse(3): the decoding is
      // explicit and reads the same for any loop shape. Schedule dynamic: with a causal mask a
      // block's cost grows with its position, so a static split would leave the thread holding
      // the first blocks idle at the end; a task (48 rows x seq_kv x (d_k + d_v) x 2 flops) is
      // large enough that handing them out one at a time costs nothing measurable.
#pragma omp for schedule(dynamic)
      for (int64_t task = 0; task < tasks; ++task) {
        errors.capture([&] {
          const int64_t head_index = task / q_blocks;  // b * heads + h
          const int64_t b = head_index / s.heads;
          const int64_t kv_index = b * s.kv_heads + head_index % s.heads / s.group_size();
          const int64_t q_begin = task % q_blocks * kTileQ;
          const HeadView<float> head = p.head<float>(b, head_index % s.heads);
          Block block;
          block.q = head.q;
          block.keys_t = keys_t_ + kv_index * s.d_k * stride;
          block.v = head.v;
          block.o = head.o;
          block.weights = head.weights;
          block.scores = scores_ + omp_get_thread_num() * scores_per_thread(s);
          query_block(s, p.scale, block, q_begin, std::min(q_begin + kTileQ, s.seq_q));
        });
      }
    }
    errors.rethrow_first();
  }

 private:
  // One task's pointers: its head's tensors and its thread's scratch.
  struct Block {
    const float* q;
    const float* keys_t;  // [d_k][kv_stride]
    const float* v;
    float* o;
    float* weights;
    float* scores;  // [rows of the block][kv_stride]
  };

  // Key positions padded to whole tiles: the row length of Kᵀ and of the score rows.
  static int64_t kv_stride(const Shape& s) { return cpu_kernels::round_up(s.seq_kv, kTileKv); }
  static int64_t scores_per_thread(const Shape& s) {
    return cpu_kernels::round_up(std::min(kTileQ, s.seq_q) * kv_stride(s),
                                 cpu_kernels::kFloatsPerLine);
  }
  static int64_t keys_t_elements(const Shape& s) {
    return s.batch * s.kv_heads * s.d_k * kv_stride(s);
  }

  static void query_block(const Shape& s, float scale, const Block& block, int64_t q_begin,
                          int64_t q_end) {
    const int64_t stride = kv_stride(s);
    const int64_t rows = q_end - q_begin;
    // The block's last row sees the most keys; tiles from kv_limit on are masked for every row.
    const int64_t kv_limit = s.visible_keys(q_end - 1);

    // Scores, one Kᵀ tile at a time, reused from L1 by all the row groups.
    for (int64_t kv_begin = 0; kv_begin < kv_limit; kv_begin += kTileKv) {
      const float* keys_t = block.keys_t + kv_begin;
      for (int64_t r = 0; r < rows; r += cpu_kernels::kRowBlock) {
        const float* q = block.q + (q_begin + r) * s.d_k;
        float* out = block.scores + r * stride + kv_begin;
        const int64_t group = std::min<int64_t>(cpu_kernels::kRowBlock, rows - r);
        cpu_kernels::with_row_count(group, [&](auto group_rows) {
          cpu_kernels::score_tile<group_rows.value, kTileKv>(q, s.d_k, keys_t, stride, scale, out,
                                                             stride);
        });
      }
    }

    // Softmax over each row's visible keys; masked keys up to kv_limit become exactly 0, so the
    // weighted sum below can run a whole row group to its last row's limit.
    for (int64_t r = 0; r < rows; ++r) {
      float* row = block.scores + r * stride;
      const int64_t visible = s.visible_keys(q_begin + r);
      const float sum = cpu_kernels::exp_shifted(row, visible, cpu_kernels::row_max(row, visible));
      const float inverse = 1.0f / sum;
#pragma omp simd
      for (int64_t j = 0; j < visible; ++j) row[j] *= inverse;
      std::fill(row + visible, row + kv_limit, 0.0f);
      if (block.weights != nullptr) {
        float* weights_row = block.weights + (q_begin + r) * s.seq_kv;
        std::copy(row, row + visible, weights_row);
        std::fill(weights_row + visible, weights_row + s.seq_kv, 0.0f);
      }
    }

    // O = P V, one V tile at a time, reused from L1 by all the row groups.
    std::fill(block.o + q_begin * s.d_v, block.o + q_end * s.d_v, 0.0f);
    for (int64_t kv_begin = 0; kv_begin < kv_limit; kv_begin += kTileKv) {
      const float* v = block.v + kv_begin * s.d_v;
      for (int64_t r = 0; r < rows; r += cpu_kernels::kRowBlock) {
        const int64_t group = std::min<int64_t>(cpu_kernels::kRowBlock, rows - r);
        const int64_t group_limit = s.visible_keys(q_begin + r + group - 1);
        const int64_t keys = std::min(kTileKv, group_limit - kv_begin);
        if (keys <= 0) continue;
        const float* weights = block.scores + r * stride + kv_begin;
        float* out = block.o + (q_begin + r) * s.d_v;
        cpu_kernels::with_row_count(group, [&](auto group_rows) {
          cpu_kernels::add_weighted_values<group_rows.value>(weights, stride, v, s.d_v, keys, out);
        });
      }
    }
  }

  int threads_ = 1;
  float* scores_ = nullptr;
  float* keys_t_ = nullptr;
};

}  // namespace

ATTNBENCH_REGISTER_VARIANT(OpenmpVariant);

}  // namespace attnbench
