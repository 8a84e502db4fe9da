// flash_cpu's decode path (flash_cpu/decode_plan.h, decode_piece.h) against a plain float64
// reference written here: seq_q 1, 4 and 16, GQA ratios 1, 4 and 8, caches not a multiple of the
// page or of the split, one-key caches, causal seq_q > 1 aligned to each sequence's end, every
// dtype and layout, contiguous caches and paged ones read through a shuffled block table built
// here, ragged batches, every SIMD path the CPU runs, several thread counts (so the keys are
// split and merged at different places), and repeated runs giving the same bytes. The plan's
// cuts are checked on their own: every key once, the same number of keys per thread.
#include <omp.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/core/element_types.h"
#include "harness/measure/executor.h"
#include "harness/simd/isa.h"
#include "harness/variant/registry.h"
#include "tests/edge_shapes.h"
#include "tests/flash_cpu_paths.h"
#include "variants/cpu/flash_cpu/decode_plan.h"

namespace attnbench {
namespace {

// The OpenMP thread count for one scope (the decode plan cuts the keys into one segment each).
class ScopedThreads {
 public:
  explicit ScopedThreads(int threads) : old_(omp_get_max_threads()) {
    omp_set_num_threads(threads);
  }
  ~ScopedThreads() { omp_set_num_threads(old_); }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int old_;
};

// A tensor's elements in its dtype, with the fp32 values they hold (what the reference reads).
struct Buffer {
  std::vector<uint8_t> bytes;
  DType dtype = DType::fp32;
  explicit Buffer(DType type, int64_t elements)
      : bytes(static_cast<std::size_t>(elements * element_bytes(type))), dtype(type) {}
  void set(int64_t index, float value) {
    narrow_from_fp32(dtype, &value, bytes.data() + index * element_bytes(dtype), 1);
  }
  float get(int64_t index) const { return load_as_fp32(dtype, bytes.data(), index); }
};

// One decode problem: inputs, the cache laid out contiguously or in shuffled pages, and O.
struct DecodeInputs {
  Shape shape;
  TensorView q_logical, k_logical, v_logical;  // [batch, heads, seq, d] in the shape's layout
  Buffer q, k, v, o;
  Buffer k_pool, v_pool;  // the page pools of a paged cache
  std::vector<int32_t> block_table;
  Problem problem;

  explicit DecodeInputs(const Shape& s, uint32_t seed)
      : shape(s),
        q(s.dtype, s.q_elements()),
        // The logical cache, contiguous (k_elements() of a paged shape counts its page pool).
        k(s.dtype, s.batch * s.kv_heads * s.seq_kv * s.d_k),
        v(s.dtype, s.batch * s.kv_heads * s.seq_kv * s.d_v),
        o(s.dtype, s.o_elements()),
        k_pool(s.dtype, 0),
        v_pool(s.dtype, 0) {
    std::mt19937 random(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    // Keys past a sequence's length hold NaN: a kernel that reads them fails.
    const float nan = std::numeric_limits<float>::quiet_NaN();
    q_logical = make_view("q", q.bytes.data(), s.dtype, s.layout, s.batch, s.heads, s.seq_q, s.d_k);
    k_logical =
        make_view("k", k.bytes.data(), s.dtype, s.layout, s.batch, s.kv_heads, s.seq_kv, s.d_k);
    v_logical =
        make_view("v", v.bytes.data(), s.dtype, s.layout, s.batch, s.kv_heads, s.seq_kv, s.d_v);
    for (int64_t i = 0; i < s.q_elements(); ++i) q.set(i, normal(random));
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.kv_heads; ++h)
        for (int64_t j = 0; j < s.seq_kv; ++j) {
          const bool held = j < s.keys_of(b);
          for (int64_t c = 0; c < s.d_k; ++c)
            k.set(k_logical.offset(b, h, j) + c, held ? normal(random) : nan);
          for (int64_t c = 0; c < s.d_v; ++c)
            v.set(v_logical.offset(b, h, j) + c, held ? normal(random) : nan);
        }
    for (int64_t i = 0; i < s.o_elements(); ++i) o.set(i, nan);
    problem.shape = s;
    problem.scale = 1.0f / std::sqrt(static_cast<float>(s.d_k));
    problem.tensors.q = q_logical;
    problem.tensors.k = k_logical;
    problem.tensors.v = v_logical;
    problem.tensors.o =
        make_view("o", o.bytes.data(), s.dtype, s.layout, s.batch, s.heads, s.seq_q, s.d_v);
    if (s.kv_cache.is_paged()) lay_out_pages(random);
  }

  // Each sequence's pages placed at shuffled places of a pool with spare pages (never read).
  void lay_out_pages(std::mt19937& random) {
    const Shape& s = shape;
    const int64_t page = s.kv_cache.page_size;
    const int64_t per_sequence = (s.seq_kv + page - 1) / page;
    int64_t used = 0;
    for (int64_t b = 0; b < s.batch; ++b) used += (s.keys_of(b) + page - 1) / page;
    const int64_t pool_pages = used + 3;
    std::vector<int32_t> places(static_cast<std::size_t>(pool_pages));
    std::iota(places.begin(), places.end(), 0);
    std::shuffle(places.begin(), places.end(), random);
    k_pool = Buffer(s.dtype, pool_pages * s.kv_heads * page * s.d_k);
    v_pool = Buffer(s.dtype, pool_pages * s.kv_heads * page * s.d_v);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (auto* pool : {&k_pool, &v_pool})
      for (std::size_t i = 0; i < pool->bytes.size() / element_bytes(s.dtype); ++i)
        pool->set(static_cast<int64_t>(i), nan);
    const TensorView k_view =
        make_view("k", k_pool.bytes.data(), s.dtype, s.layout, pool_pages, s.kv_heads, page, s.d_k);
    const TensorView v_view =
        make_view("v", v_pool.bytes.data(), s.dtype, s.layout, pool_pages, s.kv_heads, page, s.d_v);
    block_table.assign(static_cast<std::size_t>(s.batch * per_sequence), -1);
    std::size_t next = 0;
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t p = 0; p * page < s.keys_of(b); ++p) {
        const int32_t place = places[next++];
        block_table[static_cast<std::size_t>(b * per_sequence + p)] = place;
        for (int64_t h = 0; h < s.kv_heads; ++h)
          for (int64_t j = p * page; j < std::min(s.keys_of(b), (p + 1) * page); ++j) {
            for (int64_t c = 0; c < s.d_k; ++c)
              k_pool.set(k_view.offset(place, h, j - p * page) + c,
                         k.get(k_logical.offset(b, h, j) + c));
            for (int64_t c = 0; c < s.d_v; ++c)
              v_pool.set(v_view.offset(place, h, j - p * page) + c,
                         v.get(v_logical.offset(b, h, j) + c));
          }
      }
    problem.tensors.k = k_view;
    problem.tensors.v = v_view;
    problem.pages = {block_table.data(), per_sequence, page};
  }

  // The largest |o - reference| / (tolerance) over every element: at most 1 passes.
  double worst_error_ratio() const {
    const Shape& s = shape;
    const double atol = s.dtype == DType::fp32 ? 2e-5 : s.dtype == DType::fp16 ? 2e-3 : 1.6e-2;
    const double scale = problem.scale;
    double worst = 0;
    std::vector<double> weights;
    for (int64_t b = 0; b < s.batch; ++b) {
      const MaskGeometry mask(s.mask, s.seq_q, s.keys_of(b));
      for (int64_t h = 0; h < s.heads; ++h)
        for (int64_t i = 0; i < s.seq_q; ++i) {
          const int64_t kv = h / s.group_size();
          weights.assign(static_cast<std::size_t>(s.keys_of(b)), 0.0);
          double max_score = -std::numeric_limits<double>::infinity();
          for (int64_t j = 0; j < s.keys_of(b); ++j) {
            if (!mask.visible(i, j)) continue;
            double dot = 0;
            for (int64_t c = 0; c < s.d_k; ++c)
              dot += static_cast<double>(q.get(q_logical.offset(b, h, i) + c)) *
                     k.get(k_logical.offset(b, kv, j) + c);
            weights[static_cast<std::size_t>(j)] = dot * scale;
            max_score = std::max(max_score, dot * scale);
          }
          double sum = 0;
          for (int64_t j = 0; j < s.keys_of(b); ++j) {
            double& w = weights[static_cast<std::size_t>(j)];
            w = mask.visible(i, j) ? std::exp(w - max_score) : 0.0;
            sum += w;
          }
          const TensorView& o_view = problem.tensors.o;
          for (int64_t c = 0; c < s.d_v; ++c) {
            double reference = 0;
            for (int64_t j = 0; j < s.keys_of(b); ++j)
              if (weights[static_cast<std::size_t>(j)] > 0)
                reference += weights[static_cast<std::size_t>(j)] / sum *
                             v.get(v_logical.offset(b, kv, j) + c);
            const double got = o.get(o_view.offset(b, h, i) + c);
            const double ratio = std::fabs(got - reference) / (atol * (1 + std::fabs(reference)));
            worst =
                std::isnan(got) ? std::numeric_limits<double>::infinity() : std::max(worst, ratio);
          }
        }
    }
    return worst;
  }
};

Shape decode_shape(int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq_q, int64_t seq_kv,
                   int64_t d, bool causal) {
  return testing::make_shape(batch, heads, kv_heads, seq_q, seq_kv, d, d, causal);
}

Shape ragged(Shape s, std::vector<int64_t> lens) {
  s.batch = static_cast<int64_t>(lens.size());
  s.seq_kv = *std::max_element(lens.begin(), lens.end());
  s.kv_lens = std::move(lens);
  return s;
}

// The shapes every path, dtype, layout and cache layout is tried on.
std::vector<testing::NamedShape> decode_shapes() {
  return {
      {"decode GQA 4, d 128, 333 keys", decode_shape(1, 8, 2, 1, 333, 128, false)},
      {"decode GQA 8, one key", decode_shape(2, 8, 1, 1, 1, 64, false)},
      {"decode MHA, d 13, 70 keys", decode_shape(1, 3, 3, 1, 70, 13, false)},
      {"decode MHA, d 64, 101 keys", decode_shape(1, 3, 3, 1, 101, 64, false)},
      {"decode GQA 3, d 96, 50 keys", decode_shape(1, 6, 2, 1, 50, 96, false)},
      {"speculative 4, causal GQA 4, 97 keys", decode_shape(1, 4, 1, 4, 97, 32, true)},
      {"speculative 16, causal GQA 8, 300 keys", decode_shape(1, 16, 2, 16, 300, 40, true)},
      {"ragged 1, 17, 250, 64 keys, GQA 4",
       ragged(decode_shape(1, 4, 1, 1, 1, 24, false), {1, 17, 250, 64})},
      {"ragged causal seq_q 4, 5, 130 keys",
       ragged(decode_shape(1, 2, 2, 4, 1, 16, true), {5, 130})},
      {"ragged prefill through the decode path, causal 40 x 90, 41",
       ragged(decode_shape(1, 2, 1, 40, 1, 16, true), {90, 41})},
  };
}

TEST_CASE("flash_cpu decode matches a float64 reference on every path, dtype, layout and cache",
          "[flash_cpu][decode]") {
  auto executor = make_executor(Device::cpu);
  const RegisteredVariant* registered = Registry::instance().find("flash_cpu");
  REQUIRE(registered != nullptr);
  REQUIRE(registered->info.capabilities.ragged);
  REQUIRE(registered->info.capabilities.paged_kv);
  uint32_t seed = 1;
  for (const std::string& isa : testing::isa_names_built()) {
    if (!testing::cpu_supports(isa)) continue;
    const testing::ScopedEnvironment chosen(testing::kIsaVariable, isa);
    for (const auto& [name, base] : decode_shapes())
      for (DType dtype : all_dtypes())
        for (Layout layout : all_layouts())
          // Pages that divide a 64-key tile (16), that do not (5, 24: a piece split on a
          // multiple of 64 keys starts inside a page), longer than a tile (100), and more of
          // them than a tile gathers (1, 5: a tile ends short of 64 keys after 8 pages).
          for (const KvCacheSpec cache :
               {KvCacheSpec::contiguous(), KvCacheSpec::paged(16), KvCacheSpec::paged(5),
                KvCacheSpec::paged(24), KvCacheSpec::paged(100), KvCacheSpec::paged(1)}) {
            Shape s = base;
            s.dtype = dtype;
            s.layout = layout;
            s.kv_cache = cache;
            INFO(isa << " " << name << " " << describe(s) << " " << to_string(cache));
            DecodeInputs inputs(s, seed++);
            auto variant = registered->make();
            executor->workspace().release_all();
            variant->prepare(s, executor->workspace());
            CHECK(variant->code_path().find("decode") != std::string::npos);
            // The avx512_bf16 path's bf16 scores are vdpbf16ps products (d_k in 32s, a KV head's
            // rows in 4s), and say so (the path that ran, whatever was asked for).
            const bool dot_scores = variant->code_path().rfind("avx512_bf16", 0) == 0 &&
                                    dtype == DType::bf16 && s.d_k % 32 == 0 &&
                                    s.group_size() * s.seq_q % 4 == 0;
            CHECK((variant->code_path().find("vdpbf16ps_scores") != std::string::npos) ==
                  dot_scores);
            variant->run(inputs.problem);
            CHECK(inputs.worst_error_ratio() <= 1.0);
          }
  }
}

TEST_CASE("flash_cpu decode splits keys across any thread count and repeats itself exactly",
          "[flash_cpu][decode]") {
  auto executor = make_executor(Device::cpu);
  const RegisteredVariant* registered = Registry::instance().find("flash_cpu");
  REQUIRE(registered != nullptr);
  // One KV head and one sequence: every thread past the first gets a piece of the same keys.
  const std::vector<testing::NamedShape> shapes = {
      {"one KV head, 1000 keys", decode_shape(1, 4, 1, 1, 1000, 64, false)},
      {"ragged 3, 2000, 129", ragged(decode_shape(1, 8, 2, 1, 1, 32, false), {3, 2000, 129})},
      {"paged:16 causal 4 queries", decode_shape(1, 4, 2, 4, 777, 32, true)},
      {"paged:24 one KV head, 1000 keys", decode_shape(1, 4, 1, 1, 1000, 64, false)},
  };
  for (int threads : {1, 2, 3, 7}) {
    const ScopedThreads team(threads);
    for (const auto& [name, base] : shapes) {
      Shape s = base;
      s.dtype = DType::bf16;
      if (name.rfind("paged:16", 0) == 0) s.kv_cache = KvCacheSpec::paged(16);
      if (name.rfind("paged:24", 0) == 0) s.kv_cache = KvCacheSpec::paged(24);
      INFO(threads << " threads, " << name);
      DecodeInputs inputs(s, 7);
      auto variant = registered->make();
      executor->workspace().release_all();
      variant->prepare(s, executor->workspace());
      variant->run(inputs.problem);
      CHECK(inputs.worst_error_ratio() <= 1.0);
      const std::vector<uint8_t> first = inputs.o.bytes;
      variant->run(inputs.problem);
      CHECK(inputs.o.bytes == first);
    }
  }
}

TEST_CASE("the decode plan covers every key once and gives each thread the same keys",
          "[flash_cpu][decode]") {
  const Shape s = ragged(decode_shape(1, 32, 8, 1, 1, 128, false),
                         {1024, 65536, 3000, 17, 40000, 8192, 2048, 30000});
  const std::vector<MaskGeometry> masks = flash_cpu::sequence_masks(s);
  for (int threads : {1, 2, 5, 16}) {
    INFO(threads << " threads");
    const flash_cpu::DecodePlan plan(s, masks, threads);
    REQUIRE(plan.thread_first_piece.size() == static_cast<std::size_t>(threads + 1));
    std::vector<int64_t> covered(plan.items.size(), 0);
    std::vector<int64_t> next_key(plan.items.size(), -1);
    int64_t total = 0;
    std::vector<int64_t> per_thread;
    for (int t = 0; t < threads; ++t) {
      int64_t keys = 0;
      for (int64_t i = plan.thread_first_piece[t]; i < plan.thread_first_piece[t + 1]; ++i) {
        const flash_cpu::DecodePiece& piece = plan.pieces[static_cast<std::size_t>(i)];
        const flash_cpu::DecodeItem& item = plan.items[static_cast<std::size_t>(piece.item)];
        int64_t& expected = next_key[static_cast<std::size_t>(piece.item)];
        CHECK(piece.first_key == (expected < 0 ? item.keys.first : expected));
        expected = piece.last_key;
        covered[static_cast<std::size_t>(piece.item)] += piece.last_key - piece.first_key;
        keys += piece.last_key - piece.first_key;
      }
      per_thread.push_back(keys);
      total += keys;
    }
    for (std::size_t i = 0; i < plan.items.size(); ++i)
      CHECK(covered[i] == plan.items[i].keys.last - plan.items[i].keys.first);
    const int64_t fair = total / threads;
    for (int64_t keys : per_thread) CHECK(std::abs(keys - fair) <= flash_cpu::kSplitAlign);
    CHECK(plan.slots <= 2 * (threads - 1));
  }
}

}  // namespace
}  // namespace attnbench
