// flash_cpu: fused, flash-style attention for the CPU. Each thread takes one block of 96 query
// rows of one head and walks its visible keys in blocks of 48, never holding more than a 48 x 96
// score tile: S = Q Kᵀ for the tile by a register-blocked micro-kernel (which also leaves the
// tile's column max behind), an online softmax on the tile while it is hot in L1 (running row max
// and sum; the accumulator is rescaled when the max grows), then O = alpha O + P V by a second
// micro-kernel; O is divided by the row sums once, at the end.
// It improves on blas by never writing the n x n scores to memory: the max, the exp and the sum
// run on a tile in L1 instead of streaming n² floats through memory between the GEMMs, and masked
// tiles are skipped instead of computed and thrown away (block-sparse, for every mask kind).
// Time: 2 * seq_q * seq_kv * (d_k + d_v) flops over the visible pairs plus one exp2 per visible
// score; about 75% of the FMA peak at n 4096 (the softmax takes 5-12% of the time).
// Memory: per thread, Qᵀ of a query block, one score tile, the O accumulator of a query block and
// one padded V block: O(d) per thread, independent of the sequence lengths.
// The kernels are written once against the SIMD layer (harness/simd/) and compiled once per path
// (flash_cpu/kernels_<isa>.cpp): scalar, AVX2, AVX-512 (bf16 as vdpbf16ps where that outpaces
// widening to fp32) and NEON; the widest the CPU runs is chosen at run time (flash_cpu/
// isa_choice.h; ATTNBENCH_FLASH_CPU_ISA overrides it) and recorded as the case's code path.
// Backward (FlashAttention-2's, flash_cpu/backward_key_block.h): the forward keeps each row's
// log-sum-exp L (one float per query row); the backward recomputes P = exp2(S - L) tile by tile,
// parallel over key blocks (each thread owns a block's dK and dV), dQ summed from one fp32 copy per
// thread. Time: 2.5x the forward's FLOPs; memory: L and D (O(seq_q) per head) plus per thread its
// tiles (O(d) per key and query block) and its dQ copy (threads x |dQ|). bf16 on matrix tiles
// (flash_cpu/forward_tile_query_block.h; the amx_bf16 path): where the CPU has AMX, the bf16 passes
// takes_tiles() accepts run both products as TDPBF16PS on 16 x 16 tiles of fp32 accumulators, with
// the same softmax and mask classification between them on AVX-512; K and V are packed into the
// tile layout once per (batch, KV head, key block of kTileKeyBlock), before the query blocks, and
// shared by all of them and by the GQA group. Its memory: that packed copy (the bf16 K and V,
// padded to whole key blocks and d to 32) plus O(d) per thread. The bf16 backward takes the tiles
// too (flash_cpu/backward_tile_key_block.h): its five products as TDPBF16PS, P and dS rounded to
// bf16 before theirs, split by key blocks as the vector backward; Q and dO packed once before the
// key blocks. Its memory: L and D, that packed Q and dO (2x the bf16 Q and dO, padded to d 32 and
// whole query blocks), O(d) per thread and the threads' dQ copies. ATTNBENCH_FLASH_CPU_ISA=amx_bf16
// forces it (refused where AMX is absent); amx_bf16_emulated runs it on emulated tiles, for tests.
// Every other case runs on the vector path, and the code path names which ran. Decode (seq_q up to
// kDecodeQueries), ragged batches, paged and quantized caches (int8 and fp8_e4m3 codes, widened in
// registers; the scales applied per key to the scores and the weights, flash_cpu/decode_piece.h)
// take the decode path instead (flash_cpu/decode_plan.h): each KV head's group of query rows in one
// pass over its keys, the keys split across threads so each streams the same bytes, partial softmax
// states merged at the end (flash-decoding). It is correct for any seq_q, so every ragged or paged
// case goes through it; a long prefill that way is slower than the forward (its products are dot
// products along d, not register-blocked tiles). Its memory: 64 query rows' Q and output per
// thread, and at most 2 (threads - 1) partial states of the same size.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/core/mask.h"
#include "harness/variant/parallel_errors.h"
#include "harness/variant/registry.h"
#include "variants/cpu/flash_cpu/backward_rows.h"
#include "variants/cpu/flash_cpu/forward_blocks.h"
#include "variants/cpu/flash_cpu/isa_choice.h"
#include "variants/cpu/flash_cpu/output_overflow.h"

namespace attnbench {
namespace {

// Query rows per head up to which the decode path beats the forward's 96-row query blocks.
constexpr int64_t kDecodeQueries = 16;

// The backward keeps the forward's log-sum-exp, which only the query-block path writes (ragged
// and paged cases have no backward: unsupported_reason() skips them).
bool takes_decode_path(const Shape& s) {
  if (needs_backward(s.pass)) return false;
  return s.seq_q <= kDecodeQueries || !s.kv_lens.empty() || s.kv_cache.is_paged() ||
         is_quantized(s.kv_dtype);
}

// The cases the tile path takes: bf16 passes the decode path does not take (forwards of more
// than kDecodeQueries queries with contiguous K and V; every backward, whose forward then keeps L
// on the tiles too), d_k and d_v up to kTileMaxD (256).
bool takes_tiles(const Shape& s) {
  return s.dtype == DType::bf16 && !takes_decode_path(s) && s.d_k <= flash_cpu::kTileMaxD &&
         s.d_v <= flash_cpu::kTileMaxD;
}

// Whether this case runs on tiles here; an ATTNBENCH_FLASH_CPU_ISA that prepare() refuses counts
// as no (prepare() then says why).
bool runs_on_tiles(const Shape& s) {
  if (!takes_tiles(s)) return false;
  try {
    return flash_cpu::choose_paths_for_this_cpu().tiles != flash_cpu::TileBackend::none;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

class FlashCpuVariant final : public Variant {
 public:
  VariantInfo info() const override {
    VariantInfo info;
    info.name = "flash_cpu";
    info.device = Device::cpu;
    info.summary =
        "fused flash-style blocks, online softmax, register-blocked SIMD micro-kernels (the "
        "widest path the CPU runs; ATTNBENCH_FLASH_CPU_ISA overrides); decode, ragged batches "
        "and paged caches by split-KV flash-decoding; O(d) workspace per thread";
    info.capabilities.causal = true;
    info.capabilities.masks = all_mask_kinds();
    info.capabilities.alibi = true;
    info.capabilities.softcap = true;
    info.capabilities.gqa = true;
    info.capabilities.returns_weights = false;
    info.capabilities.dtypes = all_dtypes();
    info.capabilities.layouts = all_layouts();
    info.capabilities.backward = true;
    info.capabilities.ragged = true;
    info.capabilities.paged_kv = true;
    info.capabilities.kv_dtypes = {KvDType::int8, KvDType::fp8_e4m3};
    return info;
  }

  std::size_t workspace_bytes(const Shape& s) const override {
    const auto threads = static_cast<std::size_t>(omp_get_max_threads());
    if (runs_on_tiles(s)) {
      const flash_cpu::TileLayout layout(s);
      std::size_t bytes = threads * static_cast<std::size_t>(layout.per_thread) * sizeof(float) +
                          static_cast<std::size_t>(layout.packed_bytes());
      if (needs_backward(s.pass)) {
        const flash_cpu::TileBackwardLayout backward(s);
        bytes += (2 * row_floats(s) +
                  threads * static_cast<std::size_t>(backward.per_thread + backward.dq)) *
                     sizeof(float) +
                 static_cast<std::size_t>(backward.packed_query_bytes());
      }
      return bytes;
    }
    if (takes_decode_path(s)) {
      return flash_cpu::DecodePlan(s, flash_cpu::sequence_masks(s), static_cast<int>(threads))
                 .workspace_floats(s, static_cast<int>(threads)) *
             sizeof(float);
    }
    std::size_t floats = threads * static_cast<std::size_t>(flash_cpu::ScratchLayout(s).per_thread);
    if (needs_backward(s.pass)) {
      const flash_cpu::KeyBlockLayout layout(s);
      floats += 2 * row_floats(s) + threads * static_cast<std::size_t>(layout.tiles + layout.dq);
    }
    return floats * sizeof(float);
  }

  // L: one float per query row (padded to a cache line), O(seq_q) where P would be O(seq_q²).
  std::size_t saved_for_backward_bytes(const Shape& s) const override {
    return needs_backward(s.pass) ? row_floats(s) * sizeof(float) : 0;
  }

  void prepare(const Shape& s, Workspace& workspace) override {
    refuse_unsupported(info(), s);
    const flash_cpu::PathChoice paths = flash_cpu::choose_paths_for_this_cpu();
    threads_ = omp_get_max_threads();
    forward_ = ForwardState{};
    backward_ = BackwardState{};
    decode_ = DecodeState{};
    if (paths.tiles != flash_cpu::TileBackend::none && takes_tiles(s)) {
      path_ = Path::tiles;
      tile_kernels_ = flash_cpu::tile_kernels(paths.tiles);
      prepare_tile_forward(s, workspace);
      if (needs_backward(s.pass)) prepare_tile_backward(s, workspace);
      code_path_ = paths.tiles == flash_cpu::TileBackend::hardware
                       ? "amx_bf16+tiles"
                       : std::string(flash_cpu::kEmulatedTilesName) + "+tiles";
      return;
    }
    kernels_ = flash_cpu::vector_kernels(paths);
    if (takes_decode_path(s)) {
      path_ = Path::decode;
      prepare_decode(s, workspace);
      code_path_ = flash_cpu::vector_path_name(paths) + decode_widening(s, paths.isa);
      return;
    }
    path_ = Path::vectors;
    prepare_forward(s, paths.isa, workspace);
    if (needs_backward(s.pass)) prepare_backward(s, workspace);
    code_path_ = flash_cpu::vector_path_name(paths) + forward_widening(s);
  }

  std::string code_path() const override { return code_path_; }

  void run(const Problem& p) override {
    if (path_ == Path::tiles) {
      run_tiles(p);
      return;
    }
    if (path_ == Path::decode) {
      run_decode(p);
      return;
    }
    flash_cpu::Job job = forward_job(p);
    job.bf16_dot = forward_.bf16_dot;
    job.lse = backward_.lse;
    const flash_cpu::ScratchLayout layout(p.shape);
    const int64_t items = p.shape.batch * p.shape.heads * job.query_blocks;
    const flash_cpu::BlockFunction block = kernels_.forward_query_block;
    float* const scratch_base = forward_.scratch;
    ParallelErrors errors;
#pragma omp parallel num_threads(threads_)
    {
      const flash_cpu::Scratch scratch =
          layout.carve(scratch_base + omp_get_thread_num() * layout.per_thread);
      // Causal blocks differ in cost; dynamic scheduling (and the heaviest blocks first, see
      // flash_cpu/forward_query_block.h) keeps every core busy to the end.
#pragma omp for schedule(dynamic, 1)
      for (int64_t item = 0; item < items; ++item)
        errors.capture([&] { block(job, item, scratch); });
    }
    errors.rethrow_first();
  }

  void run_backward(const BackwardProblem& p) override {
    if (backward_.lse == nullptr)
      throw std::runtime_error("flash_cpu: backward on a shape prepared for the forward only");
    if (path_ == Path::tiles) {
      run_tiles_backward(p);
      return;
    }
    const flash_cpu::KeyBlockLayout layout(p.shape);
    const flash_cpu::KeyBlockJob job = backward_job(p, layout);
    const flash_cpu::KeyBlockFunction key_block = kernels_.backward_key_block;
    float* const tiles = backward_.tiles;
    float* const delta = backward_.delta;
    const int64_t rows = p.shape.batch * p.shape.heads * p.shape.seq_q;
    run_key_blocks(
        p, p.shape.batch * p.shape.kv_heads * job.key_blocks, layout.dq, layout.dk_stride,
        [&](int thread, float* copy, ParallelErrors& errors) {
#pragma omp for schedule(static)
          for (int64_t chunk = 0; chunk < (rows + kRowChunk - 1) / kRowChunk; ++chunk)
            errors.capture([&] {
              flash_cpu::output_gradient_dots(p, chunk * kRowChunk,
                                              std::min(rows, (chunk + 1) * kRowChunk), delta);
            });
          return layout.carve(tiles + thread * layout.tiles, copy);
        },
        [&](int64_t item, const flash_cpu::KeyBlockScratch& scratch) {
          key_block(job, item, scratch);
        },
        [] {});
  }

 private:
  static constexpr int64_t kRowChunk = 64;  // query rows per step of the row-wise passes

  // Which path prepare() chose: the vector forward and backward (kernels_), the same on matrix
  // tiles (tile_kernels_), or the decode path (kernels_).
  enum class Path { vectors, tiles, decode };

  // The forward's state, on vectors or tiles; its mask serves the backward's jobs too.
  struct ForwardState {
    std::optional<MaskGeometry> mask;  // built in prepare(), outside the timed run
    bool bf16_dot = false;             // bf16 products as vdpbf16ps (the vector path)
    float* scratch = nullptr;          // per thread: ScratchLayout's, or TileLayout's on tiles
    uint16_t* packed = nullptr;        // K and V in the tile layout (the tile path)
  };

  // The backward's state, where the pass has one (else all null), on vectors or tiles.
  struct BackwardState {
    float* lse = nullptr;                // the forward's L, kept for the backward
    float* delta = nullptr;              // the backward's D
    float* tiles = nullptr;              // the backward's tiles, per thread
    float* dq_copies = nullptr;          // the backward's dQ copies, per thread
    uint32_t* packed_queries = nullptr;  // Q and dO in the tile layout (the tile path)
  };

  // The decode path's state: the plan, built in prepare() with each sequence's mask.
  struct DecodeState {
    std::vector<MaskGeometry> sequence_masks;
    flash_cpu::DecodePlan plan;
    float* scratch = nullptr;  // per thread, then the plan's slots of partial states
  };

  // Floats of L (or D): one per query row, rounded up to a cache line.
  static std::size_t row_floats(const Shape& s) {
    return static_cast<std::size_t>(
        flash_cpu::round_up(s.batch * s.heads * s.seq_q, flash_cpu::kCacheLine));
  }

  void prepare_forward(const Shape& s, Isa isa, Workspace& workspace) {
    forward_.mask.emplace(s.mask_geometry());
    // bf16 products as vdpbf16ps take d_k in pairs.
    forward_.bf16_dot = isa == Isa::avx512_bf16 && s.dtype == DType::bf16 && s.d_k % 2 == 0;
    const auto forward_floats = static_cast<std::size_t>(threads_) *
                                static_cast<std::size_t>(flash_cpu::ScratchLayout(s).per_thread);
    forward_.scratch = workspace.allocate_array<float>(forward_floats);
  }

  void prepare_backward(const Shape& s, Workspace& workspace) {
    const flash_cpu::KeyBlockLayout layout(s);
    backward_.lse = workspace.allocate_array<float>(row_floats(s));
    backward_.delta = workspace.allocate_array<float>(row_floats(s));
    backward_.tiles =
        workspace.allocate_array<float>(static_cast<std::size_t>(threads_ * layout.tiles));
    backward_.dq_copies =
        workspace.allocate_array<float>(static_cast<std::size_t>(threads_ * layout.dq));
  }

  void prepare_tile_forward(const Shape& s, Workspace& workspace) {
    forward_.mask.emplace(s.mask_geometry());
    const flash_cpu::TileLayout layout(s);
    forward_.scratch = workspace.allocate_array<float>(static_cast<std::size_t>(threads_) *
                                                       static_cast<std::size_t>(layout.per_thread));
    forward_.packed = workspace.allocate_array<uint16_t>(static_cast<std::size_t>(layout.packed));
  }

  void prepare_tile_backward(const Shape& s, Workspace& workspace) {
    const flash_cpu::TileBackwardLayout layout(s);
    backward_.lse = workspace.allocate_array<float>(row_floats(s));
    backward_.delta = workspace.allocate_array<float>(row_floats(s));
    backward_.tiles = workspace.allocate_array<float>(static_cast<std::size_t>(threads_) *
                                                      static_cast<std::size_t>(layout.per_thread));
    backward_.dq_copies = workspace.allocate_array<float>(static_cast<std::size_t>(threads_) *
                                                          static_cast<std::size_t>(layout.dq));
    backward_.packed_queries =
        workspace.allocate_array<uint32_t>(static_cast<std::size_t>(layout.packed_queries));
  }

  void prepare_decode(const Shape& s, Workspace& workspace) {
    decode_.sequence_masks = flash_cpu::sequence_masks(s);
    decode_.plan = flash_cpu::DecodePlan(s, decode_.sequence_masks, threads_);
    decode_.scratch = workspace.allocate_array<float>(decode_.plan.workspace_floats(s, threads_));
  }

  // How narrow inputs reach the forward's kernels, for the code path: as vdpbf16ps products, or
  // widened to fp32 per block.
  std::string forward_widening(const Shape& s) const {
    if (forward_.bf16_dot) return "+vdpbf16ps";
    if (s.dtype != DType::fp32) return std::string("+widened_") + to_string(s.dtype);
    return "";
  }

  // The decode path's code path suffix: narrow K and V are widened in registers as they are
  // loaded; on the avx512_bf16 path a bf16 cache's scores are vdpbf16ps products instead, by
  // decode_piece.h's decode_scores_as_dot rule (d_k a multiple of 32, a KV head's rows a multiple
  // of 4; V is still widened).
  static std::string decode_widening(const Shape& s, Isa isa) {
    if (is_quantized(s.kv_dtype)) return std::string("+decode_widened_") + to_string(s.kv_dtype);
    if (isa == Isa::avx512_bf16 && s.dtype == DType::bf16 &&
        s.d_k % flash_cpu::kDecodeDotElements == 0 && s.group_size() * s.seq_q % 4 == 0)
      return "+decode_vdpbf16ps_scores_widened_bf16";
    if (s.dtype != DType::fp32) return std::string("+decode_widened_") + to_string(s.dtype);
    return "+decode";
  }

  // The backward's parallel region, both paths': each thread's dQ copy (copy_floats, rows
  // dk_stride apart) zeroed, then per thread `start_thread(thread, copy, errors)` (its scratch,
  // after D for every query row and any other work it shares out first), the `items` key blocks,
  // and `end_thread()`; then dQ = the sum of the copies. A fixed round-robin over the key blocks
  // rather than dynamic scheduling: each thread's dQ copy then sums the same key blocks in the same
  // order every run, so the result is the same to the bit. Neighbouring key blocks cost about the
  // same even under a causal mask.
  template <class StartThread, class KeyBlock, class EndThread>
  void run_key_blocks(const BackwardProblem& p, int64_t items, int64_t copy_floats,
                      int64_t dk_stride, StartThread start_thread, KeyBlock key_block,
                      EndThread end_thread) {
    const Shape& s = p.shape;
    const int64_t rows = s.batch * s.heads * s.seq_q;
    const int64_t row_chunks = (rows + kRowChunk - 1) / kRowChunk;
    float* const copies = backward_.dq_copies;
    ParallelErrors errors;
#pragma omp parallel num_threads(threads_)
    {
      const int thread = omp_get_thread_num();
      const int team = omp_get_num_threads();
      float* const copy = copies + thread * copy_floats;
      std::fill(copy, copy + copy_floats, 0.0f);
      const auto scratch = start_thread(thread, copy, errors);
#pragma omp for schedule(static, 1)
      for (int64_t item = 0; item < items; ++item)
        errors.capture([&] { key_block(item, scratch); });
      end_thread();
#pragma omp for schedule(static)
      for (int64_t chunk = 0; chunk < row_chunks; ++chunk)
        errors.capture([&] {
          flash_cpu::sum_query_gradients(p, copies, team, copy_floats, dk_stride, chunk * kRowChunk,
                                         std::min(rows, (chunk + 1) * kRowChunk));
        });
    }
    errors.rethrow_first();
  }

  flash_cpu::KeyBlockJob backward_job(const BackwardProblem& p,
                                      const flash_cpu::KeyBlockLayout& layout) const {
    return backward_job(p, flash_cpu::kBackwardKeys, layout.dk_stride, layout.dv_stride);
  }

  // The job of a backward in key blocks of `block_keys`, its tiles' rows padded to the strides.
  flash_cpu::KeyBlockJob backward_job(const BackwardProblem& p, int64_t block_keys,
                                      int64_t dk_stride, int64_t dv_stride) const {
    flash_cpu::KeyBlockJob job;
    job.shape = p.shape;
    job.scale = p.scale;
    job.scale_log2 = p.scale * flash_cpu::kLog2e;
    job.softcap_log2 = static_cast<float>(p.shape.softcap) * flash_cpu::kLog2e;
    job.mask = &*forward_.mask;
    job.tensors = p.tensors;
    job.dout = p.dout;
    job.dk = p.dk;
    job.dv = p.dv;
    job.lse = backward_.lse;
    job.delta = backward_.delta;
    job.bf16_dot = forward_.bf16_dot;
    job.key_blocks = (p.shape.seq_kv + block_keys - 1) / block_keys;
    job.dk_stride = dk_stride;
    job.dv_stride = dv_stride;
    return job;
  }

  // What every forward job holds: the problem, its scale, mask and query blocks; no vdpbf16ps
  // products and no saved log-sum-exp (the vector paths set theirs). Also the tile backward's
  // map of its query blocks (a Problem or a BackwardProblem).
  template <class AnyProblem>
  flash_cpu::Job forward_job(const AnyProblem& p) const {
    flash_cpu::Job job;
    job.shape = p.shape;
    job.scale_log2 = p.scale * flash_cpu::kLog2e;
    job.mask = &*forward_.mask;
    job.softcap_log2 = static_cast<float>(p.shape.softcap) * flash_cpu::kLog2e;
    job.tensors = p.tensors;
    job.query_blocks = (p.shape.seq_q + flash_cpu::kQueryBlock - 1) / flash_cpu::kQueryBlock;
    job.dv_stride = flash_cpu::round_up(p.shape.d_v, flash_cpu::kMaxWidth);
    job.bf16_dot = false;
    job.lse = nullptr;
    return job;
  }

  // K and V packed (every thread a share of the blocks), then the query blocks; each thread's
  // tiles configured for the region and released at its end.
  void run_tiles(const Problem& p) {
    flash_cpu::TileJob tile_job{flash_cpu::Job{}, flash_cpu::TileLayout(p.shape), forward_.packed,
                                1};
    flash_cpu::Job& job = tile_job.job;
    job = forward_job(p);
    job.lse = backward_.lse;
    tile_job.group = flash_cpu::TileJob::group_for(job, threads_);
    const flash_cpu::TileLayout& layout = tile_job.layout;
    const int64_t pack_items = p.shape.batch * p.shape.kv_heads * layout.key_blocks;
    const int64_t groups = tile_job.groups();
    const flash_cpu::TileKernels kernels = tile_kernels_;
    float* const scratch_base = forward_.scratch;
    ParallelErrors errors;
#pragma omp parallel num_threads(threads_)
    {
      const flash_cpu::TileGroupScratch scratch = flash_cpu::TileGroupScratch::carve(
          layout, scratch_base + omp_get_thread_num() * layout.per_thread);
      errors.capture([&] { kernels.begin(); });
#pragma omp for schedule(static)
      for (int64_t item = 0; item < pack_items; ++item)
        errors.capture([&] { kernels.pack(tile_job, item); });
#pragma omp for schedule(dynamic, 1)
      for (int64_t item = 0; item < groups; ++item)
        errors.capture([&] { kernels.forward_query_group(tile_job, item, scratch); });
      kernels.end();
    }
    errors.rethrow_first();
  }

  // As the vector backward (run_backward), on tiles: each thread first packs its share of the
  // query blocks' Q and dO, taking their rows' D on the way (the key blocks wait for all of
  // them), and holds its tiles configured over its key blocks.
  void run_tiles_backward(const BackwardProblem& p) {
    const Shape& s = p.shape;
    if (p.dout.dtype != DType::bf16)
      throw std::runtime_error("flash_cpu: the tile backward takes dO in bf16, as O");
    flash_cpu::TileBackwardJob tile_job{flash_cpu::KeyBlockJob{}, forward_job(p),
                                        flash_cpu::TileBackwardLayout(s), backward_.packed_queries,
                                        backward_.delta};
    const flash_cpu::TileBackwardLayout& layout = tile_job.layout;
    tile_job.grads =
        backward_job(p, flash_cpu::kTileBackwardKeyBlock, layout.dk_padded, layout.dv_padded);
    const int64_t pack_items = s.batch * s.heads * layout.query_blocks;
    const flash_cpu::TileKernels kernels = tile_kernels_;
    float* const tiles = backward_.tiles;
    run_key_blocks(
        p, s.batch * s.kv_heads * layout.key_blocks, layout.dq, layout.dk_padded,
        [&](int thread, float* copy, ParallelErrors& errors) {
#pragma omp for schedule(static)
          for (int64_t item = 0; item < pack_items; ++item)
            errors.capture([&] { kernels.pack_backward_queries(tile_job, item); });
          errors.capture([&] { kernels.begin(); });
          return flash_cpu::TileBackwardScratch::carve(layout, tiles + thread * layout.per_thread,
                                                       copy);
        },
        [&](int64_t item, const flash_cpu::TileBackwardScratch& scratch) {
          kernels.backward_key_block(tile_job, item, scratch);
        },
        [&] { kernels.end(); });
  }

  // Each thread runs its segment of the plan's pieces; then the split items are merged.
  void run_decode(const Problem& p) {
    flash_cpu::DecodeJob job;
    job.shape = p.shape;
    job.scale_log2 = p.scale * flash_cpu::kLog2e;
    job.softcap_log2 = static_cast<float>(p.shape.softcap) * flash_cpu::kLog2e;
    job.tensors = p.tensors;
    if (p.shape.kv_cache.is_paged()) {
      if (p.pages.block_table == nullptr || p.pages.page_size != p.shape.kv_cache.page_size)
        throw std::runtime_error("flash_cpu: a paged case needs its block table of pages of " +
                                 std::to_string(p.shape.kv_cache.page_size) + " tokens");
      job.pages = {p.pages.block_table, p.pages.pages_per_sequence, p.pages.page_size};
    }
    if (is_quantized(p.shape.kv_dtype)) {
      if (p.kv_scales.k == nullptr || p.kv_scales.v == nullptr)
        throw std::runtime_error("flash_cpu: a quantized cache needs its K and V scales");
      job.k_scales = p.kv_scales.k;
      job.v_scales = p.kv_scales.v;
    }
    job.masks = &decode_.sequence_masks;
    const flash_cpu::DecodeLayout layout(p.shape);
    job.dk_stride = layout.dk_stride;
    job.dv_stride = layout.dv_stride;
    const flash_cpu::DecodePlan& plan = decode_.plan;
    const flash_cpu::DecodePieceFunction attend_piece = kernels_.decode_piece;
    const flash_cpu::DecodeMergeFunction merge_states = kernels_.decode_merge;
    float* const slots = decode_.scratch + threads_ * layout.per_thread;
    const int threads = threads_;
    // An item whose O accumulator passed float's range (V near float's largest values) says so;
    // the pass then runs again with P scaled down (flash_cpu/forward_blocks.h).
    std::atomic<bool> overflowed{false};
    job.overflowed = &overflowed;
    const auto run_pass = [&] {
      ParallelErrors errors;
#pragma omp parallel num_threads(threads_)
      {
        const flash_cpu::DecodeScratch own =
            layout.carve(decode_.scratch + omp_get_thread_num() * layout.per_thread);
        // The plan has one segment per thread; a smaller team shares them out.
        for (int t = omp_get_thread_num(); t < threads; t += omp_get_num_threads())
          for (int64_t i = plan.thread_first_piece[t]; i < plan.thread_first_piece[t + 1]; ++i)
            errors.capture([&] {
              const flash_cpu::DecodePiece& piece = plan.pieces[static_cast<std::size_t>(i)];
              flash_cpu::DecodeScratch scratch = own;
              if (piece.slot >= 0)
                scratch.state = layout.state_at(slots + piece.slot * layout.state);
              attend_piece(job, plan.items[static_cast<std::size_t>(piece.item)], piece, scratch);
            });
#pragma omp barrier
#pragma omp for schedule(dynamic, 1)
        for (std::size_t m = 0; m < plan.merges.size(); ++m)
          errors.capture([&] {
            const flash_cpu::DecodeMerge& merge = plan.merges[m];
            merge_states(job, plan.items[static_cast<std::size_t>(merge.item)],
                         slots + merge.first_slot * layout.state, layout.state, merge.count);
          });
      }
      errors.rethrow_first();
    };
    run_pass();
    if (overflowed.load()) {
      job.headroom_log2 = flash_cpu::kOverflowHeadroomLog2;
      run_pass();
    }
  }

  std::string code_path_;
  Path path_ = Path::vectors;
  int threads_ = 1;
  flash_cpu::Kernels kernels_{};           // the chosen ISA's: forward, backward and decode
  flash_cpu::TileKernels tile_kernels_{};  // the tile path's, where it runs
  ForwardState forward_;
  BackwardState backward_;
  DecodeState decode_;
};

}  // namespace

ATTNBENCH_REGISTER_VARIANT(FlashCpuVariant);

}  // namespace attnbench
