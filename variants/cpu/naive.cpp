// naive: the first rung of the ladder. Plain loops that read like the equation: materialise the
// whole score matrix S = scale * Q Kᵀ (masked), turn each row into softmax weights P (subtracting
// the row max so exp cannot overflow), then O = P V. No blocking, no threads, no SIMD beyond what
// the compiler finds.
// Time: 2 * seq_q * seq_kv * (d_k + d_v) flops per head, streamed straight from memory.
// Memory: the seq_q x seq_kv score matrix of one head at a time, O(n^2) workspace.
// Types: any dtype and layout: each element is widened to fp32 as it is read (accumulation is
// fp32) and O is rounded to the dtype once, as it is written; rows are found through the strides.
// Masks and modifiers: every mask kind and both modifiers, elementwise on S in mask.h's order
// (soft-cap, ALiBi bias, then the mask); masked scores are -inf, so they weigh exactly 0.
// Backward: the forward keeps every head's P (B * H * seq_q * seq_kv floats, O(n^2) more memory)
// when the shape's pass needs it, and the backward reads like the equations: dV = P^T dO,
// dP = dO V^T, D = rowsum(dO o O), dS = P o (dP - D) (times soft-capping's derivative),
// dQ = scale dS K, dK = scale dS^T Q; 2.5x the forward's flops, with the same loops.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <vector>

#include "harness/core/element_types.h"
#include "harness/variant/kv_rows.h"
#include "harness/variant/registry.h"

namespace attnbench {
namespace {

class NaiveVariant final : public Variant {
 public:
  VariantInfo info() const override {
    VariantInfo info;
    info.name = "naive";
    info.device = Device::cpu;
    info.summary = "plain loops; materialises the n x n scores and weights of one head";
    info.capabilities.causal = true;
    info.capabilities.masks = all_mask_kinds();
    info.capabilities.alibi = true;
    info.capabilities.softcap = true;
    info.capabilities.gqa = true;
    info.capabilities.returns_weights = true;
    info.capabilities.dtypes = all_dtypes();
    info.capabilities.layouts = all_layouts();
    info.capabilities.ragged = true;
    info.capabilities.paged_kv = true;
    info.capabilities.kv_dtypes = {KvDType::int8, KvDType::fp8_e4m3};
    info.capabilities.backward = true;
    return info;
  }

  std::size_t workspace_bytes(const Shape& s) const override {
    return static_cast<std::size_t>(s.seq_q * s.seq_kv) * sizeof(float) +
           saved_for_backward_bytes(s);
  }

  std::size_t saved_for_backward_bytes(const Shape& s) const override {
    return needs_backward(s.pass) ? static_cast<std::size_t>(s.weight_elements()) * sizeof(float)
                                  : 0;
  }

  void prepare(const Shape& s, Workspace& workspace) override {
    refuse_unsupported(info(), s);
    scores_ = workspace.allocate_array<float>(static_cast<std::size_t>(s.seq_q * s.seq_kv));
    saved_weights_ =
        needs_backward(s.pass)
            ? workspace.allocate_array<float>(static_cast<std::size_t>(s.weight_elements()))
            : nullptr;
    masks_.clear();
    for (int64_t b = 0; b < (s.kv_lens.empty() ? 1 : s.batch); ++b)
      masks_.push_back(s.mask_geometry_of(b));
  }

  void run(const Problem& p) override {
    const Shape& s = p.shape;
    for (int64_t b = 0; b < s.batch; ++b) {
      for (int64_t h = 0; h < s.heads; ++h) {
        with_element_type(s.dtype, [&](auto element) {
          using E = decltype(element);
          with_kv_rows<E>(s.kv_dtype, [&](auto rows) { one_head<E, decltype(rows)>(p, b, h); });
        });
      }
    }
  }

  void run_backward(const BackwardProblem& p) override {
    const Shape& s = p.shape;
    if (saved_weights_ == nullptr)
      throw std::runtime_error("naive: backward on a shape prepared without its pass");
    // dK and dV sum over each group of query heads (GQA): start from zero, then add every head.
    for (const TensorView* gradient : {&p.dk, &p.dv})
      for (int64_t b = 0; b < s.batch; ++b)
        for (int64_t g = 0; g < s.kv_heads; ++g)
          for (int64_t j = 0; j < s.seq_kv; ++j)
            std::fill_n(gradient->row<float>(b, g, j), gradient->dim, 0.0f);
    for (int64_t b = 0; b < s.batch; ++b) {
      for (int64_t h = 0; h < s.heads; ++h) {
        with_element_type(s.dtype,
                          [&](auto element) { one_head_backward<decltype(element)>(p, b, h); });
      }
    }
  }

 private:
  // Where head (b, h)'s weights P go: kept for the backward, or the one-head scratch.
  float* weights_of(const Shape& s, int64_t b, int64_t h) const {
    if (saved_weights_ == nullptr) return scores_;
    return saved_weights_ + (b * s.heads + h) * s.seq_q * s.seq_kv;
  }

  // One (sequence b, query head h). Q and O rows through the strides; each K and V row through
  // Rows (kv_rows.h: kv_row, which follows the block table of a paged cache, and a quantized
  // cache's scale). A ragged sequence's keys past its own length are scored -inf, so they weigh 0
  // and are never read.
  template <class E, class Rows>
  void one_head(const Problem& p, int64_t b, int64_t h) const {
    using Storage = typename E::Storage;
    const Shape& s = p.shape;
    float* const scores = weights_of(s, b, h);
    const float scale = p.scale;
    const HeadView<Storage> head = head_rows<Storage>(p, b, h);
    const MaskGeometry& mask = masks_[masks_.size() == 1 ? 0 : static_cast<std::size_t>(b)];
    const int64_t keys = s.keys_of(b);
    const int64_t kv_head = h / s.group_size();
    const auto q = [&](int64_t i, int64_t c) { return E::load(head.q[i * head.q_row_stride + c]); };
    const auto k_row = [&](int64_t j) {
      return Rows::row(p, p.tensors.k, p.kv_scales.k, b, kv_head, j);
    };
    const auto v_row = [&](int64_t j) {
      return Rows::row(p, p.tensors.v, p.kv_scales.v, b, kv_head, j);
    };
    // S[i][j] = modified(scale * q_i . k_j), or -inf where the mask hides key j from row i.
    const float softcap = static_cast<float>(s.softcap);
    const float slope = s.alibi ? static_cast<float>(alibi_slope(h, s.heads)) : 0.0f;
    for (int64_t i = 0; i < s.seq_q; ++i) {
      for (int64_t j = 0; j < s.seq_kv; ++j) {
        float& score = scores[i * s.seq_kv + j];
        score = -std::numeric_limits<float>::infinity();
        if (j >= keys) continue;
        const typename Rows::Row key = k_row(j);
        float dot = 0.0f;
        for (int64_t c = 0; c < s.d_k; ++c) dot += q(i, c) * key[c];
        float modified = scale * dot;
        if (softcap > 0) modified = softcap * std::tanh(modified / softcap);
        modified -= slope * static_cast<float>(std::abs(mask.position(i) - j));
        if (mask.visible(i, j)) score = modified;
      }
    }
    // P[i][j] = exp(S[i][j] - max_j S[i][j]) / sum_j exp(...).
    for (int64_t i = 0; i < s.seq_q; ++i) {
      float* row = scores + i * s.seq_kv;
      const float row_max = *std::max_element(row, row + s.seq_kv);
      float sum = 0.0f;
      for (int64_t j = 0; j < s.seq_kv; ++j) {
        row[j] = std::exp(row[j] - row_max);
        sum += row[j];
      }
      for (int64_t j = 0; j < s.seq_kv; ++j) row[j] /= sum;
    }
    // O[i][c] = sum_j P[i][j] * V[j][c].
    for (int64_t i = 0; i < s.seq_q; ++i) {
      for (int64_t c = 0; c < s.d_v; ++c) {
        float acc = 0.0f;
        for (int64_t j = 0; j < keys; ++j) acc += scores[i * s.seq_kv + j] * v_row(j)[c];
        head.o[i * head.o_row_stride + c] = E::store(acc);
      }
    }
    if (head.weights != nullptr) std::copy(scores, scores + s.seq_q * s.seq_kv, head.weights);
  }

  // dQ, dK, dV of head (b, h) from its kept P; dK and dV are added to (GQA sums heads). dS is
  // built in the one-head scratch.
  template <class E>
  void one_head_backward(const BackwardProblem& p, int64_t b, int64_t h) const {
    using T = typename E::Storage;
    const Shape& s = p.shape;
    const int64_t g = h / s.group_size();
    const auto q = [&](int64_t i, int64_t c) {
      return E::load(p.tensors.q.row<const T>(b, h, i)[c]);
    };
    const auto k = [&](int64_t j, int64_t c) {
      return E::load(p.tensors.k.row<const T>(b, g, j)[c]);
    };
    const auto v = [&](int64_t j, int64_t c) {
      return E::load(p.tensors.v.row<const T>(b, g, j)[c]);
    };
    const auto o = [&](int64_t i, int64_t c) {
      return E::load(p.tensors.o.row<const T>(b, h, i)[c]);
    };
    const auto dout = [&](int64_t i, int64_t c) {
      return E::load(p.dout.row<const T>(b, h, i)[c]);
    };
    const float* weights = weights_of(s, b, h);
    const auto P = [&](int64_t i, int64_t j) { return weights[i * s.seq_kv + j]; };
    // dV[j][c] += sum_i P[i][j] * dO[i][c].
    for (int64_t j = 0; j < s.seq_kv; ++j) {
      float* dv = p.dv.row<float>(b, g, j);
      for (int64_t c = 0; c < s.d_v; ++c) {
        float acc = 0.0f;
        for (int64_t i = 0; i < s.seq_q; ++i) acc += P(i, j) * dout(i, c);
        dv[c] += acc;
      }
    }
    // dS[i][j] = P[i][j] * (dP[i][j] - D[i]) * dcap[i][j], with dP[i][j] = dO_i . V_j,
    // D[i] = dO_i . O_i and dcap = 1 - tanh^2(raw / softcap) (1 without soft-capping; ALiBi's
    // bias is a constant and has no derivative), taken as 1 / cosh^2: 1 - t^2 cancels where t
    // nears 1 (off by a factor 2 at raw / softcap = 8 in fp32); past 44 cosh^2 is inf, dcap 0.
    const float softcap = static_cast<float>(s.softcap);
    float* ds = scores_;
    for (int64_t i = 0; i < s.seq_q; ++i) {
      float d_term = 0.0f;
      for (int64_t c = 0; c < s.d_v; ++c) d_term += dout(i, c) * o(i, c);
      for (int64_t j = 0; j < s.seq_kv; ++j) {
        float dp = 0.0f;
        for (int64_t c = 0; c < s.d_v; ++c) dp += dout(i, c) * v(j, c);
        float dcap = 1.0f;
        if (softcap > 0) {
          float dot = 0.0f;
          for (int64_t c = 0; c < s.d_k; ++c) dot += q(i, c) * k(j, c);
          const float cosh_x = std::cosh(p.scale * dot / softcap);
          dcap = 1.0f / (cosh_x * cosh_x);
        }
        ds[i * s.seq_kv + j] = P(i, j) * (dp - d_term) * dcap;
      }
    }
    // dQ[i][c] = scale * sum_j dS[i][j] * K[j][c].
    for (int64_t i = 0; i < s.seq_q; ++i) {
      float* dq = p.dq.row<float>(b, h, i);
      for (int64_t c = 0; c < s.d_k; ++c) {
        float acc = 0.0f;
        for (int64_t j = 0; j < s.seq_kv; ++j) acc += ds[i * s.seq_kv + j] * k(j, c);
        dq[c] = p.scale * acc;
      }
    }
    // dK[j][c] += scale * sum_i dS[i][j] * Q[i][c].
    for (int64_t j = 0; j < s.seq_kv; ++j) {
      float* dk = p.dk.row<float>(b, g, j);
      for (int64_t c = 0; c < s.d_k; ++c) {
        float acc = 0.0f;
        for (int64_t i = 0; i < s.seq_q; ++i) acc += ds[i * s.seq_kv + j] * q(i, c);
        dk[c] += p.scale * acc;
      }
    }
  }

  float* scores_ = nullptr;
  float* saved_weights_ = nullptr;  // every head's P, kept for the backward (null for fwd)

  // Built in prepare(), outside the timed run: one per sequence of a ragged batch, else one.
  std::vector<MaskGeometry> masks_;
};

}  // namespace

ATTNBENCH_REGISTER_VARIANT(NaiveVariant);

}  // namespace attnbench
