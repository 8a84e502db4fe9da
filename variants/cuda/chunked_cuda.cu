// chunked_cuda: split-KV, as in flash-decoding. With one query row (decode) or a few, the fused
// kernel has one block per head and leaves most of the GPU idle while a single block walks
// 128k keys. Here the keys are cut into splits that run in parallel: grid (query-row block x
// split, kv head, batch). Each block streams its 32-key K/V tiles through shared memory
// (cp.async), one key per lane, keeps an online softmax per row, and writes a partial state (max,
// sum, unnormalised accumulator) to the workspace; a second kernel combines the splits,
// rescaling each by exp2(m_s - max_s m_s). The query rows of all the heads of a GQA group share
// their K/V head's blocks, so K/V is read once per group, not once per query head. The number of
// splits fills the SMs (as many blocks each as the occupancy calculator says fit, at least four)
// without going below 256 keys per split; with a single split the partial kernel writes O itself
// and no combine runs. Over fused: parallel over keys as well as queries, so decode and
// short-query/long-KV shapes are bound by memory bandwidth instead of by one SM per head. bhsd and
// bshd are the same code with different strides (harness/cuda/attention_params.h); the partials
// are the workspace's own [split][row] layout. Serving: a ragged batch (kv_lens) bounds each
// sequence's splits by its own length (the plan's splits cover the longest; a split past a short
// sequence's end writes an empty partial the combine ignores), causal rows aligned to that end; a
// paged cache is read through its block table, each K/V row of a tile looked up on its own
// (chunked_cuda_traits.h's kv_row_offset, checked on the host against kv_row), in a kernel
// instantiation of its own, so a contiguous cache does no lookups. Time: 4 * seq_q * seq_kv * d
// flops per head (padded to 4 or 16 rows per block), plus the combine, O(splits * seq_q * d_v).
// Memory: O(splits * seq_q * d_v) workspace for the partials. Resources (nvcc 13.0, ptxas -v;
// __launch_bounds__(128, 4) caps registers at 128), contiguous: the partial kernel at 4 and 16 rows
// a block takes 65 and 126 registers at d 32, 71 and 126 at d 64, 107 and 128 at d 128 on sm_90
// (sm_80: 66 and 124, 72 and 126, 108 and 127), no spill and no stack frame; paged: 63 and 126, 67
// and 124, 106 and 128 on sm_90 (sm_80: 70 and 128, 74 and 128, 114 and 128), no spill except at d
// 128 with 16 rows (sm_90: 8 bytes stored, 16 loaded, an 8-byte stack frame; sm_80: 28 and 44, 24
// bytes); the combine 32.
#include <cuda_runtime.h>
#include <math.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "harness/cuda/async_copy.cuh"
#include "harness/cuda/attention_params.h"
#include "harness/cuda/cuda_check.h"
#include "harness/cuda/dispatch.h"
#include "harness/cuda/kernel_info.h"
#include "harness/cuda/launch_math.h"
#include "harness/cuda/online_softmax.cuh"
#include "harness/cuda/vector_load.cuh"
#include "harness/variant/registry.h"
#include "variants/cuda/chunked_cuda_traits.h"

namespace attnbench {
namespace {

using chunked_cuda::kThreads;

// The split-KV plan of one launch and the partials it writes; the tensors are AttentionParams'.
struct SplitParams {
  // Partials, one slot per (split, output row): max and sum [split][row], acc [split][row][d_v].
  // Output row (batch * heads + head) * seq_q + position, whatever the layout of O.
  float* part_max;
  float* part_sum;
  float* part_acc;
  int rows_per_kv_head;
  int num_splits, tiles_per_split;
  int64_t output_rows;
  int direct;  // one split: write normalised O instead of partials
  // Serving: each sequence's length (device memory; null when every sequence holds seq_kv) and,
  // for a paged cache, the block table (null when contiguous).
  const int32_t* kv_lens;
  const int32_t* block_table;
  int pages_per_sequence, page_size;
};

// Warp w owns rows kRows / 4 * w .. of the block; lane l owns key l of each tile (scores) and
// columns kVec * l .. kVec * l + kVec - 1 of the accumulator (O).
//
// The stages of one block, in kernel order. Each is forced inline and works on the kernel's own
// register arrays, so the kernel compiles exactly as if they were written out in it.

// The block's Q rows ([kRows][D], scaled by scale * log2 e, zero past the rows and d_k). Row r of
// this kv head is query head kv_head * group + r / seq_q, position r % seq_q.
template <int D, int kRows>
__device__ __forceinline__ void load_q_rows(float* q_s, const AttentionParams& p, int r0,
                                            int rows_valid, int kv_head, int batch, int thread) {
  for (int index = thread; index < kRows * D; index += kThreads) {
    const int block_row = index / D, column = index % D;
    const int r = r0 + block_row;
    float value = 0.0f;
    if (block_row < rows_valid && column < p.d_k) {
      const int head = kv_head * p.group + r / p.seq_q, position = r % p.seq_q;
      value =
          static_cast<const float*>(p.q)[batch * p.q_batch_stride + head * p.q_head_stride +
                                         static_cast<int64_t>(position) * p.q_row_stride + column] *
          p.scale_log2;
    }
    q_s[block_row * D + column] = value;
  }
}

// How many keys each of this warp's rows sees (0 for padding rows); where its output goes is
// found at the end, not held through the tile loop.
template <int kRowsPerWarp>
__device__ __forceinline__ void visible_keys(int (&visible)[kRowsPerWarp], const AttentionParams& p,
                                             int r0, int rows_valid, int warp, int seq_kv,
                                             bool causal) {
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int block_row = warp * kRowsPerWarp + i;
    const int position = (r0 + block_row) % p.seq_q;
    visible[i] = block_row < rows_valid
                     ? static_cast<int>(launch::visible_keys(position, p.seq_q, seq_kv, causal))
                     : 0;
  }
}

// The keys [begin, end) this block's split covers of its sequence, in `tiles` tiles of kBlockKeys:
// the split's share of seq_kv, cut at the last row's causal horizon.
struct SplitKeys {
  int begin, end, tiles;
};

template <int kRows>
__device__ __forceinline__ SplitKeys split_keys(const AttentionParams& p, const SplitParams& splits,
                                                int split, int r0, int seq_kv, bool causal) {
  SplitKeys keys;
  keys.begin = static_cast<int>(chunked_cuda::split_key_begin(split, splits.tiles_per_split));
  keys.end = static_cast<int>(chunked_cuda::split_key_end(split, splits.tiles_per_split, seq_kv));
  if (causal) {
    const int64_t last_position =
        chunked_cuda::max_query_position(r0, kRows, splits.rows_per_kv_head, p.seq_q);
    keys.end =
        min(keys.end, static_cast<int>(launch::visible_keys(last_position, p.seq_q, seq_kv, true)));
  }
  keys.tiles =
      keys.end > keys.begin
          ? static_cast<int>(launch::ceil_div(keys.end - keys.begin, chunked_cuda::kBlockKeys))
          : 0;
  return keys;
}

// s[i] = q_i · k_lane for this warp's rows: lane l scores key l of the tile (K swizzled).
template <int D, int kRowsPerWarp>
__device__ __forceinline__ void score_tile(float (&s)[kRowsPerWarp], const float* q_s,
                                           const float* k_s, int warp, int lane) {
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) s[i] = 0.0f;
  const int swizzle = lane & 7;
#pragma unroll 8
  for (int c4 = 0; c4 < D / 4; ++c4) {
    const float4 key = *reinterpret_cast<const float4*>(k_s + lane * D + ((c4 ^ swizzle) << 2));
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const float4 query =
          *reinterpret_cast<const float4*>(q_s + (warp * kRowsPerWarp + i) * D + 4 * c4);
      s[i] = fmaf(query.x, key.x, s[i]);
      s[i] = fmaf(query.y, key.y, s[i]);
      s[i] = fmaf(query.z, key.z, s[i]);
      s[i] = fmaf(query.w, key.w, s[i]);
    }
  }
}

// The online softmax over one tile for this warp's rows: keys past a row's horizon masked, the
// running max and this lane's sum moved, the accumulator rescaled, and the weights into p_s.
template <int kRowsPerWarp, int kVec>
__device__ __forceinline__ void softmax_tile(float (&s)[kRowsPerWarp],
                                             const int (&visible)[kRowsPerWarp], int kv0,
                                             float (&row_max)[kRowsPerWarp],
                                             float (&row_sum)[kRowsPerWarp],
                                             float (&acc)[kRowsPerWarp][kVec], float* p_s, int warp,
                                             int lane) {
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    // Past the row's causal horizon or past seq_kv: masked.
    if (kv0 + lane >= visible[i]) s[i] = -INFINITY;
    float tile_max = s[i];
#pragma unroll
    for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1) {
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, lane_mask));
    }
    const launch::OnlineStep step = launch::online_step(row_max[i], tile_max);
    row_max[i] = step.max;
    const float weight = exp2f(s[i] - step.base);
    row_sum[i] = row_sum[i] * step.alpha + weight;
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[i][e] *= step.alpha;
    p_s[(warp * kRowsPerWarp + i) * chunked_cuda::kBlockKeys + lane] = weight;
  }
}

// acc += P V for this warp's rows: lane l owns columns kVec * l .. of the accumulator.
template <int D, int kRowsPerWarp, int kVec>
__device__ __forceinline__ void accumulate_tile(float (&acc)[kRowsPerWarp][kVec], const float* v_s,
                                                const float* p_s, int warp, int lane) {
  constexpr int kKeys = chunked_cuda::kBlockKeys;
#pragma unroll 8
  for (int key = 0; key < kKeys; ++key) {
    const float* value_row = v_s + key * D + kVec * lane;
    float value[kVec];
    kernels::load_floats<kVec>(value_row, value);
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const float weight = p_s[(warp * kRowsPerWarp + i) * kKeys + key];
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[i][e] = fmaf(weight, value[e], acc[i][e]);
    }
  }
}

// This warp's rows out: normalised O where the split is the only one, else the partial state
// (max, the row's sum over the lanes, the unnormalised accumulator) in the split's slots.
template <int kRowsPerWarp, int kVec>
__device__ __forceinline__ void store_rows(const AttentionParams& p, const SplitParams& splits,
                                           const float (&acc)[kRowsPerWarp][kVec],
                                           const float (&row_max)[kRowsPerWarp],
                                           const float (&row_sum)[kRowsPerWarp], int split, int r0,
                                           int rows_valid, int kv_head, int batch, int warp,
                                           int lane) {
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    float total = row_sum[i];
#pragma unroll
    for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1) {
      total += __shfl_xor_sync(0xffffffffu, total, lane_mask);
    }
    const int block_row = warp * kRowsPerWarp + i;
    if (block_row >= rows_valid) continue;
    const int r = r0 + block_row;
    const int head = kv_head * p.group + r / p.seq_q, position = r % p.seq_q;
    if (splits.direct) {
      const float inverse = total > 0.0f ? 1.0f / total : 0.0f;
      float* out = static_cast<float*>(p.o) + batch * p.o_batch_stride + head * p.o_head_stride +
                   static_cast<int64_t>(position) * p.o_row_stride;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const int column = kVec * lane + e;
        if (column < p.d_v) out[column] = acc[i][e] * inverse;
      }
    } else {
      // A split that saw none of this row's keys writes max -inf, sum 0, acc 0: it adds nothing.
      const int64_t output_row =
          (static_cast<int64_t>(batch) * p.heads + head) * p.seq_q + position;
      const int64_t slot = static_cast<int64_t>(split) * splits.output_rows + output_row;
      float* out = splits.part_acc + slot * p.d_v;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const int column = kVec * lane + e;
        if (column < p.d_v) out[column] = acc[i][e];
      }
      if (lane == 0) {
        splits.part_max[slot] = row_max[i];
        splits.part_sum[slot] = total;
      }
    }
  }
}

// kPaged: K and V rows are found through the block table, one lookup per row copied.
template <int D, int kRows, bool kPaged>
// The minimum of blocks per SM makes the register cap (128 at four 128-thread blocks) a promise
// the plan can rely on, not an accident of where ptxas happens to stop.
__global__ void __launch_bounds__(kThreads, chunked_cuda::kMinBlocksPerSm)
    split_kv_partial_kernel(const AttentionParams p, const SplitParams splits) {
  constexpr int kKeys = chunked_cuda::kBlockKeys;
  constexpr int kWarps = kThreads / 32;
  constexpr int kRowsPerWarp = kRows / kWarps;
  constexpr int kVec = D / 32;
  static_assert(kKeys == 32 && kWarps == 4 && kRows % kWarps == 0, "the thread map below");

  extern __shared__ float4 shared_memory[];
  float* q_s = reinterpret_cast<float*>(shared_memory);  // [kRows][D], scaled, zero-padded
  float* k_s = q_s + kRows * D;                          // [kKeys][D], swizzled
  float* v_s = k_s + kKeys * D;                          // [kKeys][D]
  float* p_s = v_s + kKeys * D;                          // [kRows][kKeys]

  const int thread = threadIdx.x, warp = thread >> 5, lane = thread & 31;
  const int split = blockIdx.x % splits.num_splits;
  const int row_block = blockIdx.x / splits.num_splits;
  const int kv_head = blockIdx.y, batch = blockIdx.z;
  const int r0 = row_block * kRows;
  const int rows_valid = min(kRows, splits.rows_per_kv_head - r0);
  const bool causal = p.mask.kind == MaskKind::causal;
  // This sequence's keys (a ragged batch's own length); causal rows align to its end.
  const int seq_kv = splits.kv_lens != nullptr ? splits.kv_lens[batch] : p.seq_kv;
  const SplitKeys keys = split_keys<kRows>(p, splits, split, r0, seq_kv, causal);

  const int32_t* block_table = kPaged ? splits.block_table : nullptr;
  const chunked_cuda::KvRows k_rows{p.k_batch_stride, p.k_head_stride,           p.k_row_stride,
                                    block_table,      splits.pages_per_sequence, splits.page_size};
  const chunked_cuda::KvRows v_rows{p.v_batch_stride, p.v_head_stride,           p.v_row_stride,
                                    block_table,      splits.pages_per_sequence, splits.page_size};
  const auto* k_tensor = static_cast<const float*>(p.k);
  const auto* v_tensor = static_cast<const float*>(p.v);
  const auto load_kv = [&](auto swizzle, float* tile, const float* tensor,
                           const chunked_cuda::KvRows& rows, int first_key, int d, bool aligned) {
    const int rows_valid = min(kKeys, seq_kv - first_key);
    if constexpr (kPaged) {
      kernels::load_rows_async<kKeys, D, kThreads, decltype(swizzle)::value>(
          tile,
          [=](int row) {
            return tensor + chunked_cuda::kv_row_offset(rows, batch, kv_head, first_key + row);
          },
          tensor, rows_valid, d, aligned, thread);
    } else {
      kernels::load_tile_async<kKeys, D, kThreads, decltype(swizzle)::value>(
          tile, tensor + chunked_cuda::kv_row_offset(rows, batch, kv_head, first_key),
          static_cast<int>(rows.row_stride), rows_valid, d, aligned, thread);
    }
  };
  const auto load_k = [&](int first_key) {
    load_kv(std::true_type{}, k_s, k_tensor, k_rows, first_key, p.d_k, p.k_aligned_rows);
  };
  const auto load_v = [&](int first_key) {
    load_kv(std::false_type{}, v_s, v_tensor, v_rows, first_key, p.d_v, p.v_aligned_rows);
  };

  if (keys.tiles > 0) {
    load_k(keys.begin);
    kernels::cp_async_commit();
  }

  load_q_rows<D, kRows>(q_s, p, r0, rows_valid, kv_head, batch, thread);

  int visible[kRowsPerWarp];
  visible_keys(visible, p, r0, rows_valid, warp, seq_kv, causal);
  // Warps whose rows are all padding skip the arithmetic but keep loading and synchronising.
  const bool warp_active = warp * kRowsPerWarp < rows_valid;

  float acc[kRowsPerWarp][kVec];
  float row_max[kRowsPerWarp], row_sum[kRowsPerWarp];  // row_sum: this lane's keys only
  kernels::start_online_softmax(row_max, row_sum, acc);

  for (int tile = 0; tile < keys.tiles; ++tile) {
    const int kv0 = keys.begin + tile * kKeys;
    // Groups in flight, oldest first: K[tile], V[tile]. Waiting for all but one lands K[tile].
    load_v(kv0);
    kernels::commit_and_land_older_tile();

    if (warp_active) {
      float s[kRowsPerWarp];
      score_tile<D>(s, q_s, k_s, warp, lane);
      softmax_tile(s, visible, kv0, row_max, row_sum, acc, p_s, warp, lane);
    }
    __syncthreads();  // every warp is done with K[tile] (P is read only by the warp that wrote it)

    if (tile + 1 < keys.tiles) load_k(kv0 + kKeys);
    kernels::commit_and_land_older_tile();  // V[tile] has landed for every thread

    if (warp_active) accumulate_tile<D>(acc, v_s, p_s, warp, lane);
    __syncthreads();  // V[tile] is free for the next tile
  }

  if (!warp_active) return;
  store_rows(p, splits, acc, row_max, row_sum, split, r0, rows_valid, kv_head, batch, warp, lane);
}

// One block per output row (batch, head, position): O = Σ_s exp2(m_s - M) acc_s /
// Σ_s exp2(m_s - M) l_s.
__global__ void __launch_bounds__(128)
    split_kv_combine_kernel(const AttentionParams p, const SplitParams splits) {
  const int64_t row = blockIdx.x;
  const launch::SplitStats stats = launch::combine_stats(
      splits.part_max + row, splits.part_sum + row, splits.num_splits, splits.output_rows);
  const int position = static_cast<int>(blockIdx.x) % p.seq_q;
  const int batch_head = static_cast<int>(blockIdx.x) / p.seq_q;
  float* out = static_cast<float*>(p.o) + (batch_head / p.heads) * p.o_batch_stride +
               (batch_head % p.heads) * p.o_head_stride +
               static_cast<int64_t>(position) * p.o_row_stride;
  for (int column = threadIdx.x; column < p.d_v; column += blockDim.x) {
    out[column] = launch::combine_value(splits.part_max + row, splits.output_rows,
                                        splits.part_acc + row * p.d_v + column,
                                        splits.output_rows * p.d_v, splits.num_splits, stats);
  }
}

// Calls function(d, rows, paged), each a std::integral_constant, for the partial kernel's
// instantiations.
template <class Function>
void with_kernel_type(int d_bucket, int rows_per_block, bool paged, Function&& function) {
  dispatch::with_head_dim<32, 64, 128>(d_bucket, "chunked_cuda", [&](auto d) {
    const bool found = dispatch::with_one_of<4, 16>(rows_per_block, [&](auto rows) {
      dispatch::with_flag(paged, [&](auto is_paged) { function(d, rows, is_paged); });
    });
    if (!found) {
      throw std::runtime_error("chunked_cuda has no kernel for " + std::to_string(rows_per_block) +
                               " rows per block");
    }
  });
}

template <int D, int kRows, bool kPaged>
void launch_partial(const AttentionParams& params, const SplitParams& splits,
                    const chunked_cuda::SplitPlan& plan, cudaStream_t stream) {
  const dim3 blocks(static_cast<unsigned>(plan.grid_x), static_cast<unsigned>(params.kv_heads),
                    static_cast<unsigned>(params.batch));
  split_kv_partial_kernel<D, kRows, kPaged>
      <<<blocks, kThreads, chunked_cuda::partial_shared_bytes(D, kRows), stream>>>(params, splits);
  ATTNBENCH_CUDA_CHECK_LAUNCH("split_kv_partial_kernel");
}

// The SM count of the current device, or an H100/H200's 132 when none can be queried (the plan
// then only sizes the workspace estimate).
int current_sm_count() {
  int device = 0, sm_count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      sm_count <= 0) {
    static_cast<void>(cudaGetLastError());
    return 132;
  }
  return sm_count;
}

// How many partial blocks of this shape's kernel are resident per SM on the current GPU (shared
// memory, registers and threads together); the launch bounds' minimum when there is no GPU to ask.
template <int D, int kRows, bool kPaged>
int resident_blocks_per_sm() {
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &blocks, split_kv_partial_kernel<D, kRows, kPaged>, kThreads,
          chunked_cuda::partial_shared_bytes(D, kRows)) != cudaSuccess ||
      blocks <= 0) {
    static_cast<void>(cudaGetLastError());
    return chunked_cuda::kMinBlocksPerSm;
  }
  return blocks;
}

// The plan for `shape` on the current GPU: its SM count and the blocks per SM of the kernel the
// plan launches (which depends on the plan's rows per block, so that is settled first).
chunked_cuda::SplitPlan current_plan(const Shape& shape) {
  const int sm_count = current_sm_count();
  const chunked_cuda::SplitPlan first = chunked_cuda::plan_split_kv(shape, sm_count);
  int blocks_per_sm = chunked_cuda::kMinBlocksPerSm;
  // A d past 128 has no kernel: the minimum only sizes the estimate of a shape prepare() refuses.
  const int d_bucket = launch::d_bucket(shape.d_k, shape.d_v);
  if (d_bucket != 0) {
    with_kernel_type(d_bucket, first.rows_per_block, shape.kv_cache.is_paged(),
                     [&](auto d, auto rows, auto paged) {
                       blocks_per_sm =
                           resident_blocks_per_sm<decltype(d)::value, decltype(rows)::value,
                                                  decltype(paged)::value>();
                     });
  }
  return chunked_cuda::plan_split_kv(shape, sm_count, blocks_per_sm);
}

class ChunkedCudaVariant final : public Variant {
 public:
  VariantInfo info() const override {
    VariantInfo info = cuda_kernel_info(
        "chunked_cuda",
        "split-KV (flash-decoding): key ranges in parallel, partial softmax states combined; "
        "for decode and long KV; ragged batches and paged caches",
        false);
    info.capabilities.ragged = true;
    info.capabilities.paged_kv = true;
    return info;
  }

  std::size_t workspace_bytes(const Shape& shape) const override {
    return static_cast<std::size_t>(
        chunked_cuda::split_workspace_bytes(current_plan(shape), shape.d_v));
  }

  void prepare(const Shape& shape, Workspace& workspace) override {
    refuse_unsupported(info(), shape);
    d_bucket_ = launch::d_bucket(shape.d_k, shape.d_v);
    if (d_bucket_ == 0) throw std::runtime_error("chunked_cuda supports d_k and d_v up to 128");
    constexpr int64_t int_max = std::numeric_limits<int>::max();
    if (shape.seq_kv > int_max - 2 * chunked_cuda::kBlockKeys ||
        shape.group_size() * shape.seq_q > int_max - 16) {
      throw std::runtime_error("chunked_cuda: sequence lengths must fit in 32-bit ints");
    }
    plan_ = current_plan(shape);
    std::string grid_problem =
        launch::grid_limit_problem(plan_.grid_x, shape.kv_heads, shape.batch);
    if (grid_problem.empty() && plan_.num_splits > 1) {
      grid_problem = launch::grid_limit_problem(plan_.output_rows, 1, 1);
    }
    if (!grid_problem.empty()) throw std::runtime_error("chunked_cuda: " + grid_problem);
    part_max_ = part_sum_ = part_acc_ = nullptr;
    if (plan_.num_splits > 1) {
      const auto slots = static_cast<std::size_t>(plan_.num_splits * plan_.output_rows);
      part_max_ = workspace.allocate_array<float>(slots);
      part_sum_ = workspace.allocate_array<float>(slots);
      part_acc_ = workspace.allocate_array<float>(slots * static_cast<std::size_t>(shape.d_v));
    }
  }

  void run(const Problem& problem) override {
    if (d_bucket_ == 0) throw std::runtime_error("chunked_cuda: run() before prepare()");
    const AttentionParams params = make_attention_params(problem, nullptr);
    SplitParams splits;
    splits.part_max = part_max_;
    splits.part_sum = part_sum_;
    splits.part_acc = part_acc_;
    splits.rows_per_kv_head = static_cast<int>(plan_.rows_per_kv_head);
    splits.num_splits = static_cast<int>(plan_.num_splits);
    splits.tiles_per_split = static_cast<int>(plan_.tiles_per_split);
    splits.output_rows = plan_.output_rows;
    splits.direct = plan_.num_splits == 1 ? 1 : 0;
    const auto stream = static_cast<cudaStream_t>(problem.stream);
    splits.kv_lens = problem.kv_lens_device;
    splits.block_table = problem.pages.block_table;
    splits.pages_per_sequence = static_cast<int>(problem.pages.pages_per_sequence);
    splits.page_size = static_cast<int>(problem.pages.page_size);
    with_kernel_type(
        d_bucket_, plan_.rows_per_block, problem.pages.block_table != nullptr,
        [&](auto d, auto rows, auto paged) {
          launch_partial<decltype(d)::value, decltype(rows)::value, decltype(paged)::value>(
              params, splits, plan_, stream);
        });
    if (plan_.num_splits > 1) {
      const int threads =
          params.d_v >= 128 ? 128 : static_cast<int>(launch::ceil_div(params.d_v, 32) * 32);
      split_kv_combine_kernel<<<static_cast<unsigned>(plan_.output_rows), threads, 0, stream>>>(
          params, splits);
      ATTNBENCH_CUDA_CHECK_LAUNCH("split_kv_combine_kernel");
    }
  }

 private:
  int d_bucket_ = 0;
  chunked_cuda::SplitPlan plan_;
  float* part_max_ = nullptr;
  float* part_sum_ = nullptr;
  float* part_acc_ = nullptr;
};

}  // namespace

ATTNBENCH_REGISTER_VARIANT(ChunkedCudaVariant);

}  // namespace attnbench
