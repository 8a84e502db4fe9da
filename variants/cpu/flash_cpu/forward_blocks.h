// flash_cpu's units of work for the forward pass, shared by the variant (flash_cpu.cpp) and its
// kernels (one translation unit per SIMD path, kernels_<isa>.cpp): the block sizes, one forward
// pass as every block sees it (Job), a thread's scratch and its layout, and the entry point of the
// forward's kernel; also the vector width and round_up, which every path's layout uses.
//
// Block sizes. The score tile (48 keys x 96 queries, 18 KiB) stays in L1 (32 KiB) from the S
// kernel through the softmax to the P V kernel. The query block's Qᵀ (d_k x 96) and O
// accumulator (96 x d_v), 24 KiB each at d = 64, stay in L1/L2 while every key block reuses them;
// K and V are read once per query block, so each K/V element fetched from L2/L3 serves 96 query
// rows. 96 is a whole number of query strips on every path (4 scalar, 16 AVX2 and NEON, 32
// AVX-512), 48 a whole number of key row groups (4, 6, 12).
#pragma once

#include <cstdint>

#include "harness/core/mask.h"
#include "harness/core/shape.h"
#include "harness/core/tensor.h"
#include "harness/simd/isa.h"

namespace attnbench::flash_cpu {

constexpr int64_t kQueryBlock = 96;
constexpr int64_t kKeyBlock = 48;
constexpr int64_t kMaxWidth = 16;   // floats in the widest vector; row strides are padded to it
constexpr int64_t kCacheLine = 16;  // floats in a 64-byte cache line
constexpr float kLog2e = 1.44269504088896341f;

constexpr int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// One forward pass, as every block of work sees it. Query blocks are numbered item = 0 ..
// batch * heads * query_blocks - 1.
struct Job {
  Shape shape;
  float scale_log2;        // scale * log2(e): the kernels work in base 2
  AttentionViews tensors;  // Q, K, V, O in shape.dtype and shape.layout
  int64_t query_blocks;
  int64_t dv_stride;         // row stride of the O accumulator and of packed V
  const MaskGeometry* mask;  // which keys each query row sees
  float softcap_log2;        // shape.softcap * log2(e), or 0 for none: the cap in base 2
  bool bf16_dot;             // bf16 products as vdpbf16ps (only the avx512_bf16 kernels have them)
  // When the backward follows: [batch * heads][seq_q], each row's log2 of its sum of exp2(score)
  // (base 2, as the kernels work), +inf for a row that sees no key; null otherwise.
  float* lse;
};

// One thread's scratch, carved from the workspace in prepare().
struct Scratch {
  float* q_t;        // [d_k][kQueryBlock]: the query block transposed, pre-scaled by scale_log2
  float* scores;     // [kKeyBlock][kQueryBlock]: scores, then probabilities, key-major
  float* out;        // [kQueryBlock][dv_stride]: unnormalised O of the query block
  float* k_packed;   // [kKeyBlock][d_k]: a K block widened to fp32 / made contiguous, when needed
  float* v_packed;   // [kKeyBlock][dv_stride]: a V block with zero-padded rows, when d_v needs it
  float* row_max;    // [kQueryBlock]: running max of the (base-2) scores per query
  float* row_sum;    // [kQueryBlock]: running sum of exp2(score - row_max) per query
  float* alpha;      // [kQueryBlock]: rescale factor of the accumulator for this key block
  float* block_max;  // [kQueryBlock]: max of this key block's scores per query
};

struct ScratchLayout {
  int64_t q_t, scores, out, k_packed, v_packed, stats, per_thread;  // floats, multiples of 16

  explicit ScratchLayout(const Shape& s) {
    const int64_t dv_stride = round_up(s.d_v, kMaxWidth);
    q_t = s.d_k * kQueryBlock;
    scores = kKeyBlock * kQueryBlock;
    out = kQueryBlock * dv_stride;
    k_packed = kKeyBlock * round_up(s.d_k, kMaxWidth);
    v_packed = kKeyBlock * dv_stride;
    stats = 4 * kQueryBlock;
    per_thread = q_t + scores + out + k_packed + v_packed + stats;
  }

  Scratch carve(float* base) const {
    Scratch scratch;
    scratch.q_t = base;
    scratch.scores = scratch.q_t + q_t;
    scratch.out = scratch.scores + scores;
    scratch.k_packed = scratch.out + out;
    scratch.v_packed = scratch.k_packed + k_packed;
    scratch.row_max = scratch.v_packed + v_packed;
    scratch.row_sum = scratch.row_max + kQueryBlock;
    scratch.alpha = scratch.row_sum + kQueryBlock;
    scratch.block_max = scratch.alpha + kQueryBlock;
    return scratch;
  }
};

// Attends one block of up to kQueryBlock query rows of one (batch, head) over its visible keys.
using BlockFunction = void (*)(const Job& job, int64_t item, const Scratch& scratch);

}  // namespace attnbench::flash_cpu
