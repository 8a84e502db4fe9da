#include "harness/measure/inputs.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "harness/core/element_types.h"
#include "harness/measure/kv_quantizer.h"
#include "harness/measure/paged_cache.h"

namespace attnbench {

namespace {

// Large tensors are filled in parallel blocks, each from its own generator seeded by the
// tensor's seed and the block index: the values depend on the seed alone, never on the thread
// count, so a run is reproducible on any machine.
void fill_normal(std::vector<float>& values, int64_t count, double sigma, std::mt19937_64& rng) {
  constexpr int64_t block = 1 << 16;
  values.resize(static_cast<std::size_t>(count));
  const uint64_t tensor_seed = rng();
  const int64_t blocks = (count + block - 1) / block;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    std::seed_seq seeds{tensor_seed, static_cast<uint64_t>(b)};
    std::mt19937_64 block_rng(seeds);
    std::normal_distribution<float> normal(0.0f, static_cast<float>(sigma));
    const int64_t end = std::min(count, (b + 1) * block);
    for (int64_t i = b * block; i < end; ++i)
      values[static_cast<std::size_t>(i)] = normal(block_rng);
  }
}

// Q and K scaled by sigma give scores q.k/sqrt(d_k) with standard deviation sigma^2. With
// sigma^2 = 30 the largest score of a row of a few hundred keys is about 90, past fp32's
// exp overflow at 88.7, so a softmax that does not subtract the row max returns inf/NaN.
constexpr double large_score_sigma = 5.5;

// Keys equal to one shared vector plus noise this small make every score in a row nearly equal.
constexpr double near_constant_noise = 1e-3;

// A query that is this multiple of one key's direction scores that key ~dominance*sqrt(d_k)
// above the rest.
constexpr double dominance = 6.0;

}  // namespace

HostTensors make_inputs(const Shape& paged_or_contiguous, Distribution distribution,
                        uint64_t seed) {
  // K and V are drawn contiguous, and a paged shape's laid out in pages at the end: the values do
  // not depend on the layout, so a paged case and its contiguous twin read the same numbers.
  Shape shape = paged_or_contiguous;
  shape.kv_cache = KvCacheSpec::contiguous();
  shape.kv_dtype = KvDType::case_dtype;
  std::mt19937_64 rng(seed);
  HostTensors t;
  t.shape = shape;
  fill_normal(t.v, shape.v_elements(), 1.0, rng);
  switch (distribution) {
    case Distribution::normal:
      fill_normal(t.q, shape.q_elements(), 1.0, rng);
      fill_normal(t.k, shape.k_elements(), 1.0, rng);
      break;
    case Distribution::large_scores:
      fill_normal(t.q, shape.q_elements(), large_score_sigma, rng);
      fill_normal(t.k, shape.k_elements(), large_score_sigma, rng);
      break;
    case Distribution::near_constant: {
      fill_normal(t.q, shape.q_elements(), 1.0, rng);
      std::vector<float> shared;
      fill_normal(shared, shape.d_k, 1.0, rng);
      fill_normal(t.k, shape.k_elements(), near_constant_noise, rng);
      for (std::size_t i = 0; i < t.k.size(); ++i) t.k[i] += shared[i % shape.d_k];
      break;
    }
    case Distribution::dominant_key: {
      fill_normal(t.q, shape.q_elements(), 0.3, rng);
      fill_normal(t.k, shape.k_elements(), 1.0, rng);
      for (int64_t b = 0; b < shape.batch; ++b) {
        const MaskGeometry mask = shape.mask_geometry_of(b);
        for (int64_t h = 0; h < shape.heads; ++h) {
          const int64_t kv_head = h / shape.group_size();
          for (int64_t row = 0; row < shape.seq_q; ++row) {
            // The dominant key is one the row can see under the mask.
            const KeyRange visible = mask.keys(row);
            std::uniform_int_distribution<int64_t> pick(visible.first, visible.last - 1);
            const int64_t key = pick(rng);
            const float* k_row =
                &t.k[((b * shape.kv_heads + kv_head) * shape.seq_kv + key) * shape.d_k];
            float norm = 0;
            for (int64_t c = 0; c < shape.d_k; ++c) norm += k_row[c] * k_row[c];
            const float gain = static_cast<float>(dominance / std::sqrt(std::max(norm, 1e-12f)) *
                                                  std::sqrt(static_cast<double>(shape.d_k)));
            float* q_row = &t.q[((b * shape.heads + h) * shape.seq_q + row) * shape.d_k];
            for (int64_t c = 0; c < shape.d_k; ++c) q_row[c] += gain * k_row[c];
          }
        }
      }
      break;
    }
  }
  // dO is drawn last, so a backward case's Q, K and V are exactly its forward case's.
  if (needs_backward(shape.pass)) fill_normal(t.dout, shape.o_elements(), 1.0, rng);
  if (shape.dtype != DType::fp32) {
    for (std::vector<float>* tensor : {&t.q, &t.k, &t.v, &t.dout})
      for (float& value : *tensor) value = round_to(shape.dtype, value);
  }
  clear_ragged_padding(t);
  if (paged_or_contiguous.kv_cache.is_paged()) {
    t.shape = paged_or_contiguous;
    lay_out_paged(t, seed);
  }
  // Quantized last, from the values laid out as they are stored: a quantized case and its
  // unquantized twin draw the same numbers.
  t.shape = paged_or_contiguous;
  quantize_kv_cache(t);
  return t;
}

uint64_t input_seed(int64_t config_seed, int64_t case_index) {
  return static_cast<uint64_t>(config_seed) * 1000003u + static_cast<uint64_t>(case_index);
}

uint64_t case_input_seed(int64_t config_seed, bool interleave, const Case& c) {
  return input_seed(config_seed, interleave ? c.shape_index : c.index);
}

}  // namespace attnbench
