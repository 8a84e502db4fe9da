// The edge shapes every variant is tried on: where tiles, masks, GQA and odd sizes go wrong.
#pragma once

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
  s.causal = causal;
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

// Every edge shape in every dtype and layout, named "<shape>, <dtype> <layout>".
inline std::vector<NamedShape> edge_shapes_in_every_type() {
  std::vector<NamedShape> shapes;
  for (DType dtype : all_dtypes())
    for (Layout layout : all_layouts())
      for (NamedShape named : edge_shapes()) {
        named.shape.dtype = dtype;
        named.shape.layout = layout;
        named.name += std::string(", ") + to_string(dtype) + " " + to_string(layout);
        shapes.push_back(std::move(named));
      }
  return shapes;
}

}  // namespace attnbench::testing
