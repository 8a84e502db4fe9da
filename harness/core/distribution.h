// The input distributions, by name: each breaks attention kernels in a different way.
#pragma once

#include <optional>
#include <string>
#include <vector>

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

}  // namespace attnbench
