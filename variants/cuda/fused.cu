// fused: the whole forward pass in one kernel, in the style of FlashAttention-2, in fp32 on the
// CUDA cores. A block owns 64 query rows of one head; their Qᵀ (pre-scaled by scale * log2 e)
// stays in shared memory while 64-key tiles of K and V stream through it. Each of the 256 threads
// computes a 4 x 4 micro-tile of S = Q Kᵀ in registers, and the block keeps an online softmax per
// row (running max and sum, the accumulator rescaled when the max grows), writes P = exp2(S - max)
// to shared memory once, and each thread adds a 4 x (d/16) micro-tile of P V to its registers.
// O is written once, normalised, at the end; the seq_q x seq_kv matrix never exists. K tile t+1
// and V tile t are copied with cp.async while the other product is computed. Causal blocks skip
// the tiles wholly behind the mask and run heaviest-first. GQA: query head h reads kv head
// h / group.
// Over cublas: no n x n scores written to and read back from memory (three passes of O(n^2)
// bytes), one launch instead of three, and the causal half of the work skipped.
// Time: 2 * seq_q * seq_kv * (d_k + d_v) flops per head (d padded up to the bucket: 32, 64 or
// 128), compute-bound; K and V are read once per 64 query rows. Memory: O(n): nothing but Q, K,
// V and O (no workspace).
// Resources (nvcc 13.0, -arch=sm_90, ptxas -v; __launch_bounds__(256, 2) caps registers at 128):
// d 128: 128 registers, 112 KiB dynamic shared memory, two blocks (16 warps) per H100/H200 SM;
// d 64: 122 registers, 64 KiB; d 32: 110 registers, 40 KiB; 0 bytes of spill stores and loads
// and no stack frame in every bucket (sm_80: 128, 117, 102 registers, no spills).
#include <cuda_runtime.h>
#include <math.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "harness/cuda/async_copy.cuh"
#include "harness/cuda/cuda_check.h"
#include "harness/cuda/launch_math.h"
#include "harness/variant/registry.h"

namespace attnbench {
namespace {

using launch::kFusedBlockKeys;
using launch::kFusedBlockRows;
using launch::kFusedThreads;

struct FusedParams {
  const float* q;
  const float* k;
  const float* v;
  float* o;
  int seq_q, seq_kv, d_k, d_v;
  int heads, kv_heads, group;
  int causal;
  float q_scale;  // scale * log2(e): scores come out in log2 units, ready for exp2
  int vectorized_k, vectorized_v, vectorized_o;
};

// Thread (ty, tx) of the 16 x 16 grid owns query rows 4 ty .. 4 ty + 3 and keys tx + 16 j
// (j = 0..3) of each tile; for O it owns the same rows and columns (16 c + tx) * kVec + e.
// Warp w holds row groups 2w and 2w + 1 and all 16 key groups: lane = 2 tx + (ty & 1). Both row
// groups read the same K (and V) rows, and this order puts the two readers of a 16-byte chunk
// in neighbouring lanes (l and l ^ 1), the pattern the shared-memory unit serves at twice the
// rate: a 128-bit K or V load is 2 wavefronts where lanes l and l + 16 sharing a chunk cost 4.
// Q reads (l and l ^ 2 share ty) get the same. Row reductions are shuffles over lane bits 1-4
// (the 16 lanes of one row group).
template <int D>
__global__ void __launch_bounds__(kFusedThreads, 2) fused_attention_kernel(const FusedParams p) {
  constexpr int kRows = kFusedBlockRows, kKeys = kFusedBlockKeys;
  constexpr int kVec = D >= 64 ? 4 : 2;   // O columns per vector load
  constexpr int kVecs = D / (16 * kVec);  // vectors of O per thread and row
  constexpr int kCols = kVecs * kVec;     // O columns per thread
  static_assert(kRows == 64 && kKeys == 64 && kFusedThreads == 256, "the thread map below");

  extern __shared__ float4 shared_memory[];
  float* q_t = reinterpret_cast<float*>(shared_memory);  // [D][kRows] Qᵀ, scaled, zero-padded
  float* k_s = q_t + D * kRows;                          // [kKeys][D], swizzled
  float* v_s = k_s + kKeys * D;                          // [kKeys][D]
  float* p_s = v_s + kKeys * D;                          // [kKeys][kRows] Pᵀ, swizzled

  const int thread = threadIdx.x;
  const int ty = 2 * (thread >> 5) + (thread & 1), tx = (thread & 31) >> 1;
  const int swizzle = tx & 7;  // == (tx + 16 j) & 7: the swizzle of every key row this thread owns
  // Pᵀ's swizzle: a quarter-warp stores four key rows (tx & 3) from two row groups (ty & 1); the
  // even shifts keep its eight 16-byte chunks in eight bank groups.
  const int p_swizzle = 2 * (tx & 3);  // == 2 * ((tx + 16 j) & 3)
  // Causal blocks near the end of the sequence visit the most tiles: launch them first.
  const int query_block = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int head = blockIdx.y, batch = blockIdx.z;
  const int kv_head = head / p.group;
  const int q0 = query_block * kRows;

  const float* q = p.q + (static_cast<int64_t>(batch) * p.heads + head) * p.seq_q * p.d_k;
  const float* k = p.k + (static_cast<int64_t>(batch) * p.kv_heads + kv_head) * p.seq_kv * p.d_k;
  const float* v = p.v + (static_cast<int64_t>(batch) * p.kv_heads + kv_head) * p.seq_kv * p.d_v;
  float* o = p.o + (static_cast<int64_t>(batch) * p.heads + head) * p.seq_q * p.d_v;

  const int num_tiles =
      static_cast<int>(launch::fused_kv_tiles(query_block, p.seq_q, p.seq_kv, p.causal != 0));
  const int unmasked_end =
      static_cast<int>(launch::block_unmasked_key_end(q0, p.seq_q, p.seq_kv, p.causal != 0));

  // K tile 0 is in flight while Qᵀ is written.
  kernels::load_tile_async<kKeys, D, kFusedThreads, true>(k_s, k, min(kKeys, p.seq_kv), p.d_k,
                                                          p.vectorized_k, thread);
  kernels::cp_async_commit();

  // Qᵀ: consecutive threads take consecutive rows, so the transposed stores hit distinct banks.
  for (int index = thread; index < D * kRows; index += kFusedThreads) {
    const int row = index % kRows, column = index / kRows;
    float value = 0.0f;
    if (q0 + row < p.seq_q && column < p.d_k) {
      value = q[static_cast<int64_t>(q0 + row) * p.d_k + column] * p.q_scale;
    }
    q_t[column * kRows + row] = value;
  }

  float acc[4][kCols];
  float row_max[4], row_sum[4];  // row_sum: this thread's keys only, reduced at the end
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    row_max[i] = -INFINITY;
    row_sum[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[i][c] = 0.0f;
  }

  for (int tile = 0; tile < num_tiles; ++tile) {
    const int kv0 = tile * kKeys;
    const int keys_valid = min(kKeys, p.seq_kv - kv0);
    // Groups in flight, oldest first: K[tile], V[tile]. Waiting for all but one lands K[tile].
    kernels::load_tile_async<kKeys, D, kFusedThreads, false>(
        v_s, v + static_cast<int64_t>(kv0) * p.d_v, keys_valid, p.d_v, p.vectorized_v, thread);
    kernels::cp_async_commit();
    kernels::cp_async_wait<1>();
    __syncthreads();

    // S = Qᵀᵀ K: s[i][j] for row 4 ty + i, key tx + 16 j.
    float s[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) s[i][j] = 0.0f;
#pragma unroll 4
    for (int c4 = 0; c4 < D / 4; ++c4) {
      float key[4][4];  // [j][e]: element 4 c4 + e of key tx + 16 j
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float4 chunk =
            *reinterpret_cast<const float4*>(k_s + (tx + 16 * j) * D + ((c4 ^ swizzle) << 2));
        key[j][0] = chunk.x;
        key[j][1] = chunk.y;
        key[j][2] = chunk.z;
        key[j][3] = chunk.w;
      }
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

    // Mask the keys a row must not see: past its causal horizon, or past seq_kv in the tail tile.
    if (kv0 + kKeys > unmasked_end) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int visible = static_cast<int>(
            launch::visible_keys(q0 + 4 * ty + i, p.seq_q, p.seq_kv, p.causal != 0));
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (kv0 + tx + 16 * j >= visible) s[i][j] = -INFINITY;
        }
      }
    }

    // Online softmax: the tile's row max over the 16 lanes that share the row, then rescale.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float tile_max = fmaxf(fmaxf(s[i][0], s[i][1]), fmaxf(s[i][2], s[i][3]));
#pragma unroll
      for (int lane_mask = 2; lane_mask < 32; lane_mask <<= 1) {
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, lane_mask));
      }
      const launch::OnlineStep step = launch::online_step(row_max[i], tile_max);
      row_max[i] = step.max;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        s[i][j] = exp2f(s[i][j] - step.base);
        sum += s[i][j];
      }
      row_sum[i] = row_sum[i] * step.alpha + sum;
#pragma unroll
      for (int c = 0; c < kCols; ++c) acc[i][c] *= step.alpha;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int key = tx + 16 * j;
      *reinterpret_cast<float4*>(p_s + key * kRows + ((ty ^ p_swizzle) << 2)) =
          make_float4(s[0][j], s[1][j], s[2][j], s[3][j]);
    }
    __syncthreads();  // every thread is done with K[tile], and P is complete

    // K[tile + 1] streams in while P V is computed. The commit is unconditional so the group
    // count stays the same; waiting for all but one lands V[tile].
    if (tile + 1 < num_tiles) {
      kernels::load_tile_async<kKeys, D, kFusedThreads, true>(
          k_s, k + static_cast<int64_t>(kv0 + kKeys) * p.d_k, min(kKeys, p.seq_kv - kv0 - kKeys),
          p.d_k, p.vectorized_k, thread);
    }
    kernels::cp_async_commit();
    kernels::cp_async_wait<1>();
    __syncthreads();

    // O += P V over this tile's keys.
#pragma unroll 4
    for (int key = 0; key < kKeys; ++key) {
      const float4 rows =
          *reinterpret_cast<const float4*>(p_s + key * kRows + ((ty ^ (2 * (key & 3))) << 2));
      const float weight[4] = {rows.x, rows.y, rows.z, rows.w};
#pragma unroll
      for (int c = 0; c < kVecs; ++c) {
        const float* value_row = v_s + key * D + (16 * c + tx) * kVec;
        float value[kVec];
        if constexpr (kVec == 4) {
          const float4 chunk = *reinterpret_cast<const float4*>(value_row);
          value[0] = chunk.x;
          value[1] = chunk.y;
          value[2] = chunk.z;
          value[3] = chunk.w;
        } else {
          const float2 chunk = *reinterpret_cast<const float2*>(value_row);
          value[0] = chunk.x;
          value[1] = chunk.y;
        }
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int e = 0; e < kVec; ++e) {
            acc[i][c * kVec + e] = fmaf(weight[i], value[e], acc[i][c * kVec + e]);
          }
      }
    }
    __syncthreads();  // V[tile] and P are free for the next tile
  }

  // O = acc / sum, each row's sum first reduced over its 16 lanes.
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float total = row_sum[i];
#pragma unroll
    for (int lane_mask = 2; lane_mask < 32; lane_mask <<= 1) {
      total += __shfl_xor_sync(0xffffffffu, total, lane_mask);
    }
    const float inverse = total > 0.0f ? 1.0f / total : 0.0f;
    const int row = q0 + 4 * ty + i;
    if (row >= p.seq_q) continue;
    float* out = o + static_cast<int64_t>(row) * p.d_v;
#pragma unroll
    for (int c = 0; c < kVecs; ++c) {
      const int column = (16 * c + tx) * kVec;
      if (p.vectorized_o) {
        if (column >= p.d_v) continue;  // d_v is a multiple of 4: the whole vector is in range
        if constexpr (kVec == 4) {
          *reinterpret_cast<float4*>(out + column) =
              make_float4(acc[i][c * 4] * inverse, acc[i][c * 4 + 1] * inverse,
                          acc[i][c * 4 + 2] * inverse, acc[i][c * 4 + 3] * inverse);
        } else {
          *reinterpret_cast<float2*>(out + column) =
              make_float2(acc[i][c * 2] * inverse, acc[i][c * 2 + 1] * inverse);
        }
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          if (column + e < p.d_v) out[column + e] = acc[i][c * kVec + e] * inverse;
        }
      }
    }
  }
}

bool aligned_16(const void* pointer) { return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0; }

template <int D>
void configure_kernel() {
  const int64_t bytes = launch::fused_shared_bytes(D);
  int device = 0, optin = 0;
  ATTNBENCH_CUDA_CHECK(cudaGetDevice(&device));
  ATTNBENCH_CUDA_CHECK(
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > optin) {
    throw std::runtime_error("fused needs " + std::to_string(bytes) +
                             " bytes of shared memory per block for d <= " + std::to_string(D) +
                             "; this GPU allows " + std::to_string(optin));
  }
  ATTNBENCH_CUDA_CHECK(cudaFuncSetAttribute(fused_attention_kernel<D>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(bytes)));
  // Ask for the largest shared-memory carveout, so two 112 KiB blocks fit on one SM.
  ATTNBENCH_CUDA_CHECK(cudaFuncSetAttribute(fused_attention_kernel<D>,
                                            cudaFuncAttributePreferredSharedMemoryCarveout,
                                            cudaSharedmemCarveoutMaxShared));
}

template <int D>
void launch_kernel(const FusedParams& params, const launch::FusedGeometry& grid,
                   cudaStream_t stream) {
  const dim3 blocks(static_cast<unsigned>(grid.query_blocks), static_cast<unsigned>(grid.heads),
                    static_cast<unsigned>(grid.batch));
  fused_attention_kernel<D>
      <<<blocks, kFusedThreads, launch::fused_shared_bytes(D), stream>>>(params);
  ATTNBENCH_CUDA_CHECK_LAUNCH("fused_attention_kernel");
}

class FusedVariant final : public Variant {
 public:
  VariantInfo info() const override {
    VariantInfo info;
    info.name = "fused";
    info.device = Device::cuda;
    info.summary =
        "one flash-attention-2 style kernel: K/V tiles through shared memory, online softmax, "
        "register micro-tiles; O(n) memory";
    info.capabilities.causal = true;
    info.capabilities.gqa = true;
    info.capabilities.returns_weights = false;
    info.capabilities.precision = Precision::fp32;
    info.capabilities.max_d = 128;
    return info;
  }

  std::size_t workspace_bytes(const Shape&) const override { return 0; }

  void prepare(const Shape& shape, Workspace&) override {
    d_bucket_ = launch::d_bucket(shape.d_k, shape.d_v);
    if (d_bucket_ == 0) throw std::runtime_error("fused supports d_k and d_v up to 128");
    constexpr int64_t int_max = std::numeric_limits<int>::max();
    if (shape.seq_q > int_max - kFusedBlockRows || shape.seq_kv > int_max - kFusedBlockKeys) {
      throw std::runtime_error("fused: sequence lengths must fit in 32-bit ints");
    }
    const launch::FusedGeometry grid = launch::fused_geometry(shape);
    const std::string grid_problem =
        launch::grid_limit_problem(grid.query_blocks, grid.heads, grid.batch);
    if (!grid_problem.empty()) throw std::runtime_error("fused: " + grid_problem);
    switch (d_bucket_) {
      case 32: configure_kernel<32>(); break;
      case 64: configure_kernel<64>(); break;
      default: configure_kernel<128>(); break;
    }
  }

  void run(const Problem& problem) override {
    const Shape& s = problem.shape;
    FusedParams params;
    params.q = static_cast<const float*>(problem.tensors.q.data);
    params.k = static_cast<const float*>(problem.tensors.k.data);
    params.v = static_cast<const float*>(problem.tensors.v.data);
    params.o = static_cast<float*>(problem.tensors.o.data);
    params.seq_q = static_cast<int>(s.seq_q);
    params.seq_kv = static_cast<int>(s.seq_kv);
    params.d_k = static_cast<int>(s.d_k);
    params.d_v = static_cast<int>(s.d_v);
    params.heads = static_cast<int>(s.heads);
    params.kv_heads = static_cast<int>(s.kv_heads);
    params.group = static_cast<int>(s.group_size());
    params.causal = s.causal ? 1 : 0;
    params.q_scale = problem.scale * launch::kLog2e;
    params.vectorized_k = s.d_k % 4 == 0 && aligned_16(problem.tensors.k.data);
    params.vectorized_v = s.d_v % 4 == 0 && aligned_16(problem.tensors.v.data);
    params.vectorized_o = s.d_v % 4 == 0 && aligned_16(problem.tensors.o.data);
    const launch::FusedGeometry grid = launch::fused_geometry(s);
    const auto stream = static_cast<cudaStream_t>(problem.stream);
    switch (d_bucket_) {
      case 32: launch_kernel<32>(params, grid, stream); break;
      case 64: launch_kernel<64>(params, grid, stream); break;
      case 128: launch_kernel<128>(params, grid, stream); break;
      default: throw std::runtime_error("fused: run() before prepare()");
    }
  }

 private:
  int d_bucket_ = 0;
};

}  // namespace

ATTNBENCH_REGISTER_VARIANT(FusedVariant);

}  // namespace attnbench
