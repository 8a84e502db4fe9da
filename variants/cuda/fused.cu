// fused: the whole forward pass in one kernel, in the style of FlashAttention-2, in fp32 on the
// CUDA cores. A block owns 64 query rows of one head; their Qᵀ (pre-scaled by scale * log2 e)
// stays in shared memory while 64-key tiles of K and V stream through it. Each of the 256 threads
// computes a 4 x 4 micro-tile of S = Q Kᵀ in registers, and the block keeps an online softmax per
// row (running max and sum, the accumulator rescaled when the max grows), writes P = exp2(S - max)
// to shared memory once, and each thread adds a 4 x (d/16) micro-tile of P V to its registers.
// O is written once, normalised, at the end; the seq_q x seq_kv matrix never exists. K tile t+1
// and V tile t are copied with cp.async while the other product is computed. Every mask kind is
// block-sparse (harness/cuda/mask_math.h): a block loads only the key tiles meeting its rows' key
// range (inside it, no tile is fully masked for all 64 rows), and only tiles its rows see in part
// pay for the per-element mask; causal and prefix blocks run heaviest-first. Soft-capping and
// ALiBi (log2 units, before the mask) are a second instantiation, so the unmodified kernel
// carries none of their arithmetic. GQA: query head h reads kv head h / group; bhsd and bshd
// are the same code with different strides (harness/cuda/attention_params.h).
// Over cublas: no n x n scores written to and read back from memory (three passes of O(n^2)
// bytes), one launch instead of three, and the masked tiles skipped.
// Time: 2 * seq_q * seq_kv * (d_k + d_v) flops per head (d padded up to the bucket: 32, 64 or
// 128), compute-bound; K and V are read once per 64 query rows (per visited tile, under a mask).
// Memory: O(n): nothing but Q, K, V and O; the documents mask adds its start rows (4 bytes a
// document) to the workspace.
// Resources (nvcc 13.0, -arch=sm_90, ptxas -v; __launch_bounds__(256, 2) caps registers at 128):
// d 128: 128 registers, 112 KiB dynamic shared memory, two blocks (16 warps) per H100/H200 SM;
// d 64: 118 registers, 64 KiB; d 32: 96 registers, 40 KiB (sm_80: 128, 113, 96); with
// soft-capping or ALiBi 128, 128, 96 (sm_80: 128, 128, 100). 0 bytes of spill stores and loads
// and no stack frame in any of the twelve kernels. The strides cost nothing: the bhsd-only kernel
// took 128, 128, 122 (sm_80: 128, 124, 117), and 128, 128, 128 (sm_80: 128, 128, 124) with
// modifiers. Before the masks (causal only): 128, 122, 110 (sm_80: 128, 117, 102). Holding the
// ALiBi slope through the tile loop, instead of one exp2 a tile, spilled 4 bytes at d 128 on sm_90;
// so did holding the tile classes as per-tile key tests.
#include <cuda_runtime.h>
#include <math.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "harness/cuda/async_copy.cuh"
#include "harness/cuda/attention_params.h"
#include "harness/cuda/cuda_check.h"
#include "harness/cuda/dispatch.h"
#include "harness/cuda/document_starts.h"
#include "harness/cuda/kernel_info.h"
#include "harness/cuda/launch_math.h"
#include "harness/cuda/mask_math.h"
#include "harness/cuda/online_softmax.cuh"
#include "harness/cuda/vector_load.cuh"
#include "harness/variant/registry.h"
#include "variants/cuda/fused_traits.h"

namespace attnbench {
namespace {

using fused::kBlockKeys;
using fused::kBlockRows;
using fused::kThreads;

// Thread (ty, tx) of the 16 x 16 grid owns query rows 4 ty .. 4 ty + 3 and keys tx + 16 j
// (j = 0..3) of each tile; for O it owns the same rows and columns (16 c + tx) * kVec + e.
// Warp w holds row groups 2w and 2w + 1 and all 16 key groups: lane = 2 tx + (ty & 1). Both row
// groups read the same K (and V) rows, and this order puts the two readers of a 16-byte chunk
// in neighbouring lanes (l and l ^ 1), the pattern the shared-memory unit serves at twice the
// rate: a 128-bit K or V load is 2 wavefronts where lanes l and l + 16 sharing a chunk cost 4.
// Q reads (l and l ^ 2 share ty) get the same. Row reductions are shuffles over lane bits 1-4
// (the 16 lanes of one row group).
//
// The stages of one block, in kernel order. Each is forced inline and works on the kernel's own
// register arrays, so the kernel compiles exactly as if they were written out in it.

// Qᵀ ([D][kBlockRows], scaled by scale * log2 e, zero past seq_q and d_k): consecutive threads
// take consecutive rows, so the transposed stores hit distinct banks.
template <int D>
__device__ __forceinline__ void load_q_transposed(float* q_t, const float* q,
                                                  const AttentionParams& p, int q0, int thread) {
  constexpr int kRows = kBlockRows;
  for (int index = thread; index < D * kRows; index += kThreads) {
    const int row = index % kRows, column = index / kRows;
    float value = 0.0f;
    if (q0 + row < p.seq_q && column < p.d_k) {
      value = q[static_cast<int64_t>(q0 + row) * p.q_row_stride + column] * p.scale_log2;
    }
    q_t[column * kRows + row] = value;
  }
}

// Soft-capping, then ALiBi (mask.h's order, before the mask). The slope is found again per tile
// (one exp2) rather than held through the loop: at d 128 every register is taken.
__device__ __forceinline__ void modify_scores(float (&s)[4][4], const AttentionParams& p, int head,
                                              int q0, int kv0, int ty, int tx) {
  const float slope_log2 = p.modifiers.alibi ? mask_math::alibi_slope_log2(head, p.heads) : 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int position = q0 + 4 * ty + i + (p.seq_kv - p.seq_q);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      s[i][j] =
          mask_math::modify_score(s[i][j], p.modifiers, slope_log2, position, kv0 + tx + 16 * j);
    }
  }
}

// The per-element mask, for a tile that some row sees in part (it holds keys outside a row's
// range, or past seq_kv); the rows' ranges are found again per such tile, not held in registers
// through the loop.
__device__ __forceinline__ void mask_scores(float (&s)[4][4], const AttentionParams& p, int q0,
                                            int kv0, int ty, int tx) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const mask_math::KeySpan keys = mask_math::row_keys(p.mask, q0 + 4 * ty + i);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (!mask_math::sees(keys, kv0 + tx + 16 * j)) s[i][j] = -INFINITY;
    }
  }
}

// Online softmax: the tile's row max over the 16 lanes that share the row, then s becomes
// P = exp2(S - max), the thread's share of the row sum and the accumulator are rescaled.
template <int kCols>
__device__ __forceinline__ void update_softmax(float (&s)[4][4], float (&row_max)[4],
                                               float (&row_sum)[4], float (&acc)[4][kCols]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float tile_max =
        kernels::lanes_max<2, 16>(fmaxf(fmaxf(s[i][0], s[i][1]), fmaxf(s[i][2], s[i][3])));
    const launch::OnlineStep step = launch::online_step(row_max[i], tile_max);
    row_max[i] = step.max;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      s[i][j] = exp2f(s[i][j] - step.base);
      sum += s[i][j];
    }
    row_sum[i] = row_sum[i] * step.alpha + sum;
    kernels::rescale_row(acc[i], step.alpha);
  }
}

// Pᵀ ([kBlockKeys][kBlockRows]): key tx + 16 j's four rows in one float4. Pᵀ's swizzle: a
// quarter-warp stores four key rows (tx & 3) from two row groups (ty & 1); the even shifts keep
// its eight 16-byte chunks in eight bank groups.
__device__ __forceinline__ void store_p_transposed(float* p_s, const float (&s)[4][4], int ty,
                                                   int tx, int p_swizzle) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int key = tx + 16 * j;
    *reinterpret_cast<float4*>(p_s + key * kBlockRows + ((ty ^ p_swizzle) << 2)) =
        make_float4(s[0][j], s[1][j], s[2][j], s[3][j]);
  }
}

// One row of O = acc / sum: vector stores where O's rows are aligned, one float at a time (up to
// d_v) where not.
template <int kVec, int kVecs>
__device__ __forceinline__ void store_output_row(float* out, const float (&acc_row)[kVecs * kVec],
                                                 float inverse, const AttentionParams& p, int tx) {
#pragma unroll
  for (int c = 0; c < kVecs; ++c) {
    const int column = (16 * c + tx) * kVec;
    if (p.o_aligned_rows) {
      if (column >= p.d_v) continue;  // d_v is a multiple of 4: the whole vector is in range
      if constexpr (kVec == 4) {
        *reinterpret_cast<float4*>(out + column) =
            make_float4(acc_row[c * 4] * inverse, acc_row[c * 4 + 1] * inverse,
                        acc_row[c * 4 + 2] * inverse, acc_row[c * 4 + 3] * inverse);
      } else {
        *reinterpret_cast<float2*>(out + column) =
            make_float2(acc_row[c * 2] * inverse, acc_row[c * 2 + 1] * inverse);
      }
    } else {
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        if (column + e < p.d_v) out[column + e] = acc_row[c * kVec + e] * inverse;
      }
    }
  }
}

// This block's head of Q and O and its kv head of K and V.
struct HeadTensors {
  const float* q;
  const float* k;
  const float* v;
  float* o;
};

__device__ __forceinline__ HeadTensors head_tensors(const AttentionParams& p, int batch, int head,
                                                    int kv_head) {
  return {static_cast<const float*>(p.q) + batch * p.q_batch_stride + head * p.q_head_stride,
          static_cast<const float*>(p.k) + batch * p.k_batch_stride + kv_head * p.k_head_stride,
          static_cast<const float*>(p.v) + batch * p.v_batch_stride + kv_head * p.v_head_stride,
          static_cast<float*>(p.o) + batch * p.o_batch_stride + head * p.o_head_stride};
}

// kModifiers: soft-capping or ALiBi is on; the instantiation without them has no trace of either.
template <int D, bool kModifiers>
__global__ void __launch_bounds__(kThreads, fused::kMinBlocksPerSm)
    fused_attention_kernel(const AttentionParams p) {
  constexpr int kRows = kBlockRows, kKeys = kBlockKeys;
  constexpr int kVec = D >= 64 ? 4 : 2;   // O columns per vector load
  constexpr int kVecs = D / (16 * kVec);  // vectors of O per thread and row
  constexpr int kCols = kVecs * kVec;     // O columns per thread
  static_assert(kRows == 64 && kKeys == 64 && kThreads == 256, "the thread map below");

  extern __shared__ float4 shared_memory[];
  float* q_t = reinterpret_cast<float*>(shared_memory);  // [D][kRows] Qᵀ, scaled, zero-padded
  float* k_s = q_t + D * kRows;                          // [kKeys][D], swizzled
  float* v_s = k_s + kKeys * D;                          // [kKeys][D]
  float* p_s = v_s + kKeys * D;                          // [kKeys][kRows] Pᵀ, swizzled

  const int thread = threadIdx.x;
  const int ty = 2 * (thread >> 5) + (thread & 1), tx = (thread & 31) >> 1;
  const int swizzle = tx & 7;          // == (tx + 16 j) & 7: the swizzle of every key row it owns
  const int p_swizzle = 2 * (tx & 3);  // == 2 * ((tx + 16 j) & 3)
  // Under causal and prefix masks the blocks near the end visit the most tiles: launch them first.
  const int query_block =
      mask_math::reverse_block_order(p.mask.kind) ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int head = blockIdx.y, batch = blockIdx.z, kv_head = head / p.group;
  const int q0 = query_block * kRows;

  const HeadTensors g = head_tensors(p, batch, head, kv_head);  // g: in global memory

  // The tiles holding any key these rows see (mask_math.h): the rest are never loaded. None of
  // the tiles in between is fully masked for the whole block, so every one is computed.
  const mask_math::BlockTiles tiles =
      mask_math::block_tiles(mask_math::block_keys(p.mask, q0, kRows), kKeys);

  // The first K tile is in flight while Qᵀ is written.
  const int kv_first = tiles.visit.begin * kKeys;
  const int rows_valid = tiles.visit.end > tiles.visit.begin ? min(kKeys, p.seq_kv - kv_first) : 0;
  kernels::load_tile_async<kKeys, D, kThreads, true>(
      k_s, g.k + static_cast<int64_t>(kv_first) * p.k_row_stride, p.k_row_stride, rows_valid, p.d_k,
      p.k_aligned_rows, thread);
  kernels::cp_async_commit();
  load_q_transposed<D>(q_t, g.q, p, q0, thread);

  float acc[4][kCols];
  float row_max[4], row_sum[4];  // row_sum: this thread's keys only, reduced at the end
  kernels::start_online_softmax(row_max, row_sum, acc);

  for (int tile = tiles.visit.begin; tile < tiles.visit.end; ++tile) {
    const int kv0 = tile * kKeys;
    const int keys_valid = min(kKeys, p.seq_kv - kv0);
    // Groups in flight, oldest first: K[tile], V[tile]. Waiting for all but one lands K[tile].
    kernels::load_tile_async<kKeys, D, kThreads, false>(
        v_s, g.v + static_cast<int64_t>(kv0) * p.v_row_stride, p.v_row_stride, keys_valid, p.d_v,
        p.v_aligned_rows, thread);
    kernels::commit_and_land_older_tile();

    // S = Qᵀᵀ K: s[i][j] for row 4 ty + i, key tx + 16 j; 64 FMAs per 4 + 4 float4 reads.
    float s[4][4] = {};
#pragma unroll 4
    for (int c4 = 0; c4 < D / 4; ++c4) {
      float key[4][4];  // [j][e]: element 4 c4 + e of key tx + 16 j
#pragma unroll
      for (int j = 0; j < 4; ++j)
        kernels::load_floats<4>(k_s + (tx + 16 * j) * D + ((c4 ^ swizzle) << 2), key[j]);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float4 rows = *reinterpret_cast<const float4*>(q_t + (4 * c4 + e) * kRows + 4 * ty);
        const float query[4] = {rows.x, rows.y, rows.z, rows.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) s[i][j] = fmaf(query[i], key[j][e], s[i][j]);
      }
    }
    if constexpr (kModifiers) modify_scores(s, p, head, q0, kv0, ty, tx);
    if (!tiles.unmasked.holds(tile)) mask_scores(s, p, q0, kv0, ty, tx);
    update_softmax(s, row_max, row_sum, acc);
    store_p_transposed(p_s, s, ty, tx, p_swizzle);
    __syncthreads();  // every thread is done with K[tile], and P is complete

    // K[tile + 1] streams in while P V is computed. The commit is unconditional so the group
    // count stays the same; waiting for all but one lands V[tile].
    if (tile + 1 < tiles.visit.end) {
      kernels::load_tile_async<kKeys, D, kThreads, true>(
          k_s, g.k + static_cast<int64_t>(kv0 + kKeys) * p.k_row_stride, p.k_row_stride,
          min(kKeys, p.seq_kv - kv0 - kKeys), p.d_k, p.k_aligned_rows, thread);
    }
    kernels::commit_and_land_older_tile();

    // O += P V: per key, the weights of the thread's four rows (one float4 of Pᵀ) times V.
#pragma unroll 4
    for (int key = 0; key < kKeys; ++key) {
      const float4 rows =
          *reinterpret_cast<const float4*>(p_s + key * kRows + ((ty ^ (2 * (key & 3))) << 2));
      const float weight[4] = {rows.x, rows.y, rows.z, rows.w};
#pragma unroll
      for (int c = 0; c < kVecs; ++c) {
        float value[kVec];
        kernels::load_floats<kVec>(v_s + key * D + (16 * c + tx) * kVec, value);
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int e = 0; e < kVec; ++e)
            acc[i][c * kVec + e] = fmaf(weight[i], value[e], acc[i][c * kVec + e]);
      }
    }
    __syncthreads();  // V[tile] and P are free for the next tile
  }
  // A block that visits no tile still has the prologue's zero-filling copies into k_s in flight;
  // a block must not exit with cp.async writes to its shared memory pending.
  kernels::cp_async_wait<0>();

  // O = acc / sum, each row's sum first reduced over its 16 lanes.
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float total = kernels::lanes_sum<2, 16>(row_sum[i]);
    const float inverse = total > 0.0f ? 1.0f / total : 0.0f;
    const int row = q0 + 4 * ty + i;
    if (row >= p.seq_q) continue;
    store_output_row<kVec, kVecs>(g.o + static_cast<int64_t>(row) * p.o_row_stride, acc[i], inverse,
                                  p, tx);
  }
}

template <int D, bool kModifiers>
void configure_kernel() {
  const int64_t bytes = fused::shared_bytes(D);
  int device = 0, optin = 0;
  ATTNBENCH_CUDA_CHECK(cudaGetDevice(&device));
  ATTNBENCH_CUDA_CHECK(
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > optin) {
    throw std::runtime_error("fused needs " + std::to_string(bytes) +
                             " bytes of shared memory per block for d <= " + std::to_string(D) +
                             "; this GPU allows " + std::to_string(optin));
  }
  ATTNBENCH_CUDA_CHECK(cudaFuncSetAttribute(fused_attention_kernel<D, kModifiers>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(bytes)));
  // Ask for the largest shared-memory carveout, so two 112 KiB blocks fit on one SM.
  ATTNBENCH_CUDA_CHECK(cudaFuncSetAttribute(fused_attention_kernel<D, kModifiers>,
                                            cudaFuncAttributePreferredSharedMemoryCarveout,
                                            cudaSharedmemCarveoutMaxShared));
}

template <int D, bool kModifiers>
void launch_kernel(const AttentionParams& params, const fused::Grid& grid, cudaStream_t stream) {
  const dim3 blocks(static_cast<unsigned>(grid.query_blocks), static_cast<unsigned>(grid.heads),
                    static_cast<unsigned>(grid.batch));
  fused_attention_kernel<D, kModifiers>
      <<<blocks, kThreads, fused::shared_bytes(D), stream>>>(params);
  ATTNBENCH_CUDA_CHECK_LAUNCH("fused_attention_kernel");
}

// Calls function(d, with_modifiers), both std::integral_constant, for fused's instantiations.
template <class Function>
void with_kernel_type(int d_bucket, bool modifiers, Function&& function) {
  dispatch::with_head_dim<32, 64, 128>(d_bucket, "fused", [&](auto d) {
    dispatch::with_flag(modifiers, [&](auto with_modifiers) { function(d, with_modifiers); });
  });
}

class FusedVariant final : public Variant {
 public:
  VariantInfo info() const override {
    return cuda_kernel_info(
        "fused",
        "one flash-attention-2 style kernel: K/V tiles through shared memory, online softmax, "
        "register micro-tiles, block-sparse masks; O(n) memory",
        true);
  }

  // The documents' start rows, on the device (nothing for the other masks).
  std::size_t workspace_bytes(const Shape& shape) const override {
    return mask_math::document_starts_bytes(shape.mask);
  }

  void prepare(const Shape& shape, Workspace& workspace) override {
    refuse_unsupported(info(), shape);
    d_bucket_ = launch::d_bucket(shape.d_k, shape.d_v);
    if (d_bucket_ == 0) throw std::runtime_error("fused supports d_k and d_v up to 128");
    constexpr int64_t int_max = std::numeric_limits<int>::max();
    if (shape.seq_q > int_max - kBlockRows || shape.seq_kv > int_max - kBlockKeys) {
      throw std::runtime_error("fused: sequence lengths must fit in 32-bit ints");
    }
    const fused::Grid grid = fused::grid(shape);
    const std::string grid_problem =
        launch::grid_limit_problem(grid.query_blocks, grid.heads, grid.batch);
    if (!grid_problem.empty()) throw std::runtime_error("fused: " + grid_problem);
    const mask_math::ScoreModifiers modifiers = mask_math::make_modifiers(shape);
    with_kernel_type(d_bucket_, mask_math::any_modifier(modifiers),
                     [](auto d, auto with_modifiers) {
                       configure_kernel<decltype(d)::value, decltype(with_modifiers)::value>();
                     });
    document_starts_ = upload_document_starts(shape.mask, workspace);
  }

  void run(const Problem& problem) override {
    if (d_bucket_ == 0) throw std::runtime_error("fused: run() before prepare()");
    const AttentionParams params = make_attention_params(problem, document_starts_);
    const fused::Grid grid = fused::grid(problem.shape);
    const auto stream = static_cast<cudaStream_t>(problem.stream);
    with_kernel_type(
        d_bucket_, mask_math::any_modifier(params.modifiers), [&](auto d, auto with_modifiers) {
          launch_kernel<decltype(d)::value, decltype(with_modifiers)::value>(params, grid, stream);
        });
  }

 private:
  int d_bucket_ = 0;
  const int* document_starts_ = nullptr;  // in the workspace; null unless the mask is documents
};

}  // namespace

ATTNBENCH_REGISTER_VARIANT(FusedVariant);

}  // namespace attnbench
