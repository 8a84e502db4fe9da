// The input distributions do what their names promise, reproducibly.
#include "harness/measure/inputs.h"

#include <omp.h>

#include <algorithm>
#include <catch2/catch.hpp>

#include "harness/measure/oracle.h"
#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

const Shape shape = testing::make_shape(2, 4, 2, 40, 300, 64, 48, false);

TEST_CASE("inputs depend on the seed alone, not on the thread count", "[inputs]") {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const HostTensors one_thread = make_inputs(shape, Distribution::normal, 99);
  omp_set_num_threads(std::max(2, threads));
  const HostTensors many_threads = make_inputs(shape, Distribution::normal, 99);
  omp_set_num_threads(threads);
  CHECK(one_thread.q == many_threads.q);
  CHECK(one_thread.k == many_threads.k);
  CHECK(one_thread.v == many_threads.v);
  CHECK(make_inputs(shape, Distribution::normal, 100).q != one_thread.q);
}

// The largest softmax weight of each row, from the float64 reference.
std::vector<double> row_max_weights(const HostTensors& in) {
  std::vector<double> weights;
  reference_output(in, 1.0 / 8, &weights);
  std::vector<double> maxima;
  for (std::size_t row = 0; row < weights.size() / shape.seq_kv; ++row) {
    maxima.push_back(*std::max_element(weights.begin() + row * shape.seq_kv,
                                       weights.begin() + (row + 1) * shape.seq_kv));
  }
  return maxima;
}

TEST_CASE("dominant_key gives each row one key with almost all the weight", "[inputs]") {
  for (double weight : row_max_weights(make_inputs(shape, Distribution::dominant_key, 3)))
    CHECK(weight > 0.9);
}

TEST_CASE("near_constant gives near-uniform rows", "[inputs]") {
  for (double weight : row_max_weights(make_inputs(shape, Distribution::near_constant, 3))) {
    CHECK(weight < 1.1 / static_cast<double>(shape.seq_kv));
  }
}

TEST_CASE("large_scores overflow fp32 exp without max subtraction", "[inputs]") {
  const HostTensors in = make_inputs(shape, Distribution::large_scores, 3);
  const auto reference = reference_output(in, 1.0 / 8);
  const std::vector<float> o(reference.begin(), reference.end());
  CHECK(check_against_reference(in, 1.0 / 8, o, nullptr, Precision::fp32, {}).max_abs_score > 88.8);
}

}  // namespace
}  // namespace attnbench
