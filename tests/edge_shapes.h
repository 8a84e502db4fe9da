// The edge shapes every variant is tried on: where tiles, masks, GQA and odd sizes go wrong.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "harness/core/shape.h"

namespace attnbench::testing {

struct NamedShape {
  std::string name;
  Shape shape;
};

inline Shape make_shape(int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq_q,
                        int64_t seq_kv, int64_t d_k, int64_t d_v, bool causal) {
  Shape s;
  s.batch = batch;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.seq_q = seq_q;
  s.seq_kv = seq_kv;
  s.d_k = d_k;
  s.d_v = d_v;
  s.set_mask(causal ? MaskSpec::causal() : MaskSpec::none());
  return s;
}

inline std::vector<NamedShape> edge_shapes() {
  return {
      {"seq 1", make_shape(1, 1, 1, 1, 1, 16, 16, false)},
      {"tutorial b2 seq5 d16", make_shape(2, 1, 1, 5, 5, 16, 16, false)},
      {"seq not a multiple of any tile", make_shape(1, 2, 2, 131, 131, 64, 64, false)},
      {"seq_q < seq_kv", make_shape(1, 2, 2, 37, 300, 32, 32, false)},
      {"seq_q > seq_kv", make_shape(1, 1, 1, 150, 23, 32, 32, false)},
      {"d not a multiple of 16", make_shape(1, 2, 2, 50, 70, 13, 13, false)},
      {"d_k != d_v", make_shape(1, 2, 2, 65, 65, 48, 80, false)},
      {"batch*heads > 1", make_shape(3, 4, 4, 33, 33, 64, 64, false)},
      {"causal square", make_shape(2, 2, 2, 129, 129, 64, 64, true)},
      {"causal seq_q < seq_kv", make_shape(1, 2, 2, 45, 200, 64, 64, true)},
      {"causal decode seq_q 1", make_shape(1, 2, 2, 1, 77, 64, 64, true)},
      {"GQA 8/2", make_shape(2, 8, 2, 40, 96, 64, 64, false)},
      {"MQA causal 4/1", make_shape(1, 4, 1, 70, 70, 32, 32, true)},
      {"d 128", make_shape(1, 2, 2, 100, 100, 128, 128, false)},
      {"seq 1 kv long", make_shape(1, 2, 2, 1, 1000, 64, 64, false)},
  };
}

// `shape` with a mask and modifiers.
inline Shape with_mask(Shape shape, MaskSpec mask, bool alibi = false, double softcap = 0) {
  shape.set_mask(std::move(mask));
  shape.alibi = alibi;
  shape.softcap = softcap;
  return shape;
}

// The masks and score modifiers beyond none and causal, on shapes where they go wrong: windows
// wider and narrower than a tile, a window that is the diagonal alone, the prefix empty, partial
// and whole, documents of one token and documents crossing every tile edge, and the modifiers
// alone and together. A variant that does not declare one is skipped with the reason.
inline std::vector<NamedShape> masked_edge_shapes() {
  return {
      {"window:16 GQA 4/2",
       with_mask(make_shape(1, 4, 2, 129, 129, 64, 64, false), MaskSpec::window(16))},
      {"window:0 seq_q < seq_kv",
       with_mask(make_shape(1, 2, 2, 45, 200, 32, 32, false), MaskSpec::window(0))},
      {"window:70 decode seq_q 1",
       with_mask(make_shape(1, 2, 2, 1, 300, 64, 64, false), MaskSpec::window(70))},
      {"window:100 d 13",
       with_mask(make_shape(2, 2, 2, 150, 150, 13, 13, false), MaskSpec::window(100))},
      {"prefix:40", with_mask(make_shape(1, 2, 2, 131, 131, 64, 48, false), MaskSpec::prefix(40))},
      {"prefix:0 seq_q < seq_kv",
       with_mask(make_shape(1, 2, 2, 37, 100, 32, 32, false), MaskSpec::prefix(0))},
      {"prefix:100 (all keys) seq_q < seq_kv",
       with_mask(make_shape(1, 2, 1, 37, 100, 32, 32, false), MaskSpec::prefix(100))},
      {"documents 1,30,7,50,41", with_mask(make_shape(1, 2, 2, 129, 129, 64, 64, false),
                                           MaskSpec::documents({1, 30, 7, 50, 41}))},
      {"documents one of 70, MQA 4/1",
       with_mask(make_shape(1, 4, 1, 70, 70, 32, 32, false), MaskSpec::documents({70}))},
      {"alibi, no mask",
       with_mask(make_shape(1, 8, 8, 40, 96, 64, 64, false), MaskSpec::none(), true)},
      {"alibi causal GQA 8/2",
       with_mask(make_shape(1, 8, 2, 65, 65, 32, 32, false), MaskSpec::causal(), true)},
      {"softcap:30",
       with_mask(make_shape(1, 2, 2, 50, 70, 64, 64, false), MaskSpec::none(), false, 30)},
      {"softcap:5 causal",
       with_mask(make_shape(2, 2, 2, 33, 33, 64, 64, false), MaskSpec::causal(), false, 5)},
      {"window:20 alibi softcap:30",
       with_mask(make_shape(1, 4, 4, 100, 100, 64, 64, false), MaskSpec::window(20), true, 30)},
      {"documents 9,1,40 alibi softcap:10", with_mask(make_shape(1, 2, 2, 50, 50, 16, 16, false),
                                                      MaskSpec::documents({9, 1, 40}), true, 10)},
  };
}

// Each shape in every dtype and layout, named "<shape>, <dtype> <layout>".
inline std::vector<NamedShape> in_every_type(const std::vector<NamedShape>& shapes_in_fp32) {
  std::vector<NamedShape> shapes;
  for (DType dtype : all_dtypes())
    for (Layout layout : all_layouts())
      for (NamedShape named : shapes_in_fp32) {
        named.shape.dtype = dtype;
        named.shape.layout = layout;
        named.name += std::string(", ") + to_string(dtype) + " " + to_string(layout);
        shapes.push_back(std::move(named));
      }
  return shapes;
}

// Every edge shape in every dtype and layout.
// `shape` as a ragged batch (one cache length per sequence; seq_kv the longest) and/or a paged
// cache of `page_size` tokens (0: contiguous).
inline Shape serving(Shape shape, std::vector<int64_t> kv_lens, int64_t page_size) {
  if (!kv_lens.empty()) {
    shape.batch = static_cast<int64_t>(kv_lens.size());
    shape.seq_kv = *std::max_element(kv_lens.begin(), kv_lens.end());
    shape.kv_lens = std::move(kv_lens);
  }
  if (page_size > 0) shape.kv_cache = KvCacheSpec::paged(page_size);
  return shape;
}

// Decode and speculative verification against ragged batches and paged caches: pages that do
// not divide a sequence, a page of one token, a sequence shorter than one page, GQA, causal rows
// aligned to each sequence's own end. Variants that declare ragged or paged_kv are tried on them.
inline std::vector<NamedShape> serving_edge_shapes() {
  const Shape decode = make_shape(1, 4, 2, 1, 1, 32, 32, false);
  const Shape verify = make_shape(1, 4, 1, 4, 1, 16, 24, true);
  return {
      {"paged:16 decode", serving(make_shape(2, 4, 2, 1, 100, 32, 32, false), {}, 16)},
      {"paged:1 causal square", serving(make_shape(1, 2, 2, 9, 9, 16, 16, true), {}, 1)},
      {"ragged decode", serving(decode, {5, 130, 1, 64}, 0)},
      {"ragged causal verify", serving(verify, {4, 37, 100}, 0)},
      {"ragged paged:7 decode", serving(decode, {3, 50, 7, 1}, 7)},
      {"ragged paged:8 causal verify", serving(verify, {9, 4, 33}, 8)},
  };
}

// The shapes flash_cpu's tile path is held to, in bf16 (forward and backward): every mask kind and
// modifier, GQA 4:1, bshd, seq 17 and 1000 and a single key, d_k != d_v, seq_q != seq_kv under a
// causal mask, d not a multiple of 32, and enough query blocks that the forward walks four at once
// (a short last group, each with its own causal hull).
inline std::vector<NamedShape> tile_shapes() {
  std::vector<NamedShape> shapes = {
      {"seq 17", make_shape(1, 2, 2, 17, 17, 64, 64, false)},
      {"seq 1000, d 64", make_shape(1, 1, 1, 1000, 1000, 64, 64, false)},
      {"causal GQA 4:1, query blocks in groups", make_shape(1, 8, 2, 500, 500, 32, 32, true)},
      {"seq_kv 1", make_shape(1, 2, 2, 40, 1, 64, 64, false)},
      {"GQA 4:1", make_shape(2, 8, 2, 100, 130, 64, 64, false)},
      {"causal GQA 4:1", make_shape(1, 4, 1, 150, 150, 32, 32, true)},
      {"d_k != d_v, odd", make_shape(1, 2, 1, 97, 203, 13, 21, false)},
      {"d 128", make_shape(1, 2, 2, 130, 140, 128, 128, false)},
      {"d 256/200", make_shape(1, 1, 1, 70, 300, 256, 200, false)},
      {"causal seq_q < seq_kv", make_shape(1, 2, 2, 45, 200, 64, 48, true)},
      {"seq_q > seq_kv", make_shape(1, 2, 2, 200, 70, 64, 64, false)},
      {"window:32", with_mask(make_shape(1, 2, 1, 300, 300, 40, 40, false), MaskSpec::window(32))},
      {"window:0, seq_q < seq_kv",
       with_mask(make_shape(1, 2, 2, 45, 200, 32, 32, false), MaskSpec::window(0))},
      {"prefix:64", with_mask(make_shape(1, 2, 2, 256, 256, 64, 64, false), MaskSpec::prefix(64))},
      {"documents 1,150,7,96,79", with_mask(make_shape(1, 2, 2, 333, 333, 32, 32, false),
                                            MaskSpec::documents({1, 150, 7, 96, 79}))},
      {"causal alibi softcap:30",
       with_mask(make_shape(1, 3, 3, 130, 130, 64, 64, false), MaskSpec::causal(), true, 30)},
      {"prefix:100 alibi",
       with_mask(make_shape(1, 2, 1, 250, 250, 24, 24, false), MaskSpec::prefix(100), true)},
  };
  for (auto& named : shapes) named.shape.dtype = DType::bf16;
  const std::size_t plain = shapes.size();
  for (std::size_t i = 0; i < plain; i += 3) {  // a share of them again in bshd
    NamedShape bshd = shapes[i];
    bshd.shape.layout = Layout::bshd;
    bshd.name += ", bshd";
    shapes.push_back(bshd);
  }
  return shapes;
}

inline std::vector<NamedShape> edge_shapes_in_every_type() { return in_every_type(edge_shapes()); }

}  // namespace attnbench::testing
