// Seeded random inputs from the distributions that break attention kernels in different ways.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/executor.h"

namespace attnbench {

enum class Distribution {
  normal,         // Q, K, V ~ N(0, 1)
  large_scores,   // scores of magnitude ~100: exp overflows fp32 unless the row max is subtracted
  near_constant,  // every key almost the same: near-uniform rows, sums of many equal terms
  dominant_key,   // each query row has one key that takes almost all the weight
};

const std::vector<Distribution>& all_distributions();
const char* to_string(Distribution distribution);
std::optional<Distribution> parse_distribution(const std::string& name);

HostTensors make_inputs(const Shape& shape, Distribution distribution, uint64_t seed);

}  // namespace attnbench
