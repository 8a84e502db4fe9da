// One problem's inputs on the host, as the oracle reads them.
#pragma once

#include <vector>

#include "harness/core/shape.h"

namespace attnbench {

// Q, K and V as fp32 numbers in bhsd order, whatever shape.dtype and shape.layout say: the values
// are already rounded to shape.dtype, so they are exactly the values a variant receives, and an
// executor stores them in the dtype and layout when it loads them.
struct HostTensors {
  Shape shape;
  std::vector<float> q, k, v;
  // dO, the shape of O, for a shape whose pass needs the backward (empty otherwise): rounded to
  // shape.dtype like the inputs.
  std::vector<float> dout;
};

}  // namespace attnbench
