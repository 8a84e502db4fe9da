// example: the variant CONTRIBUTING.md walks through, compiled into the test binary only, so the
// oracle and contract tests check the guide's code on every shape, mask, modifier, dtype and
// layout it declares. One query row at a time: its scores into a per-thread row of scratch, a
// softmax over the keys the mask lets it see, then the weighted sum of the values.
// Time: 2 * visible pairs * (d_k + d_v) flops, the rows of each head split over the threads.
// Memory: one seq_kv row of scores per thread, O(threads * n).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include "harness/core/element_types.h"
#include "harness/variant/registry.h"

namespace attnbench {
namespace {

class ExampleVariant final : public Variant {
 public:
  VariantInfo info() const override {
    VariantInfo info;
    info.name = "example";  // the key in configs, results and plots
    info.device = Device::cpu;
    info.summary = "the contributor's guide's example: one query row at a time, rows over threads";
    // Declare only what run() handles: a case asking for anything else is skipped with the reason.
    info.capabilities.causal = true;
    info.capabilities.masks = all_mask_kinds();
    info.capabilities.alibi = true;
    info.capabilities.softcap = true;
    info.capabilities.gqa = true;
    info.capabilities.returns_weights = true;
    info.capabilities.dtypes = all_dtypes();
    info.capabilities.layouts = all_layouts();
    return info;
  }

  // Exactly what prepare() takes, so the harness can skip a case that would not fit.
  std::size_t workspace_bytes(const Shape& s) const override {
    return static_cast<std::size_t>(omp_get_max_threads()) * static_cast<std::size_t>(s.seq_kv) *
           sizeof(float);
  }

  // Untimed: everything run() needs is allocated and built here. First, a shape info() does not
  // take is refused with its skip reason (the runner skips it before; a direct caller may not).
  void prepare(const Shape& s, Workspace& workspace) override {
    refuse_unsupported(info(), s);
    threads_ = omp_get_max_threads();
    scores_ = workspace.allocate_array<float>(static_cast<std::size_t>(threads_) *
                                              static_cast<std::size_t>(s.seq_kv));
    mask_.emplace(s.mask_geometry());
  }

  // Timed: allocates nothing. The head views are taken outside the parallel region: a view asked
  // for the wrong element type throws, and an exception must not leave an OpenMP region.
  void run(const Problem& p) override {
    const Shape& s = p.shape;
    with_element_type(s.dtype, [&](auto element) {
      using E = decltype(element);
      for (int64_t b = 0; b < s.batch; ++b) {
        for (int64_t h = 0; h < s.heads; ++h) {
          const HeadView<typename E::Storage> head = p.head<typename E::Storage>(b, h);
#pragma omp parallel for num_threads(threads_) schedule(static)
          for (int64_t i = 0; i < s.seq_q; ++i) {
            float* scores = scores_ + static_cast<int64_t>(omp_get_thread_num()) * s.seq_kv;
            one_row<E>(s, p.scale, h, i, head, scores);
          }
        }
      }
    });
  }

 private:
  // O[i] = softmax(modified scores of row i over its visible keys) V, in fp32, stored as E.
  template <class E>
  void one_row(const Shape& s, float scale, int64_t h, int64_t i,
               const HeadView<typename E::Storage>& head, float* scores) const {
    const auto* q = head.q + i * head.q_row_stride;
    const KeyRange keys = mask_->keys(i);  // keys outside it are masked: never read
    const float softcap = static_cast<float>(s.softcap);
    const float slope = s.alibi ? static_cast<float>(alibi_slope(h, s.heads)) : 0.0f;
    float row_max = -std::numeric_limits<float>::infinity();
    for (int64_t j = keys.first; j < keys.last; ++j) {
      const auto* k = head.k + j * head.k_row_stride;
      float dot = 0.0f;
      for (int64_t c = 0; c < s.d_k; ++c) dot += E::load(q[c]) * E::load(k[c]);
      // In mask.h's order: soft-cap the scaled score, add the ALiBi bias, then mask.
      float score = scale * dot;
      if (softcap > 0) score = softcap * std::tanh(score / softcap);
      score -= slope * static_cast<float>(std::abs(mask_->position(i) - j));
      scores[j] = mask_->visible(i, j) ? score : -std::numeric_limits<float>::infinity();
      row_max = std::max(row_max, scores[j]);
    }
    float sum = 0.0f;
    for (int64_t j = keys.first; j < keys.last; ++j) {
      scores[j] = std::exp(scores[j] - row_max);  // masked keys: exp(-inf) = 0
      sum += scores[j];
    }
    // P, normalised before the values: O is then a convex combination of V's rows and stays in
    // float's range wherever V does (summed first, it would pass it for V near float's largest).
    for (int64_t j = keys.first; j < keys.last; ++j) scores[j] /= sum;
    auto* o = head.o + i * head.o_row_stride;
    for (int64_t c = 0; c < s.d_v; ++c) {
      float acc = 0.0f;
      for (int64_t j = keys.first; j < keys.last; ++j)
        acc += scores[j] * E::load(head.v[j * head.v_row_stride + c]);
      o[c] = E::store(acc);  // rounded to the dtype once, as it is written
    }
    // The weights contract: when asked for, row i of P in fp32, zero for every masked key.
    if (head.weights != nullptr) {
      float* weights = head.weights + i * s.seq_kv;
      for (int64_t j = 0; j < s.seq_kv; ++j)
        weights[j] = j >= keys.first && j < keys.last ? scores[j] : 0.0f;
    }
  }

  int threads_ = 1;
  float* scores_ = nullptr;           // threads_ rows of seq_kv scores
  std::optional<MaskGeometry> mask_;  // built in prepare(), outside the timed run
};

}  // namespace

ATTNBENCH_REGISTER_VARIANT(ExampleVariant);

}  // namespace attnbench
