#include "harness/core/distribution.h"

#include "harness/core/named_values.h"

namespace attnbench {

const std::vector<Distribution>& all_distributions() {
  static const std::vector<Distribution> all = {Distribution::normal, Distribution::large_scores,
                                                Distribution::near_constant,
                                                Distribution::dominant_key};
  return all;
}

const char* to_string(Distribution distribution) {
  switch (distribution) {
    case Distribution::normal: return "normal";
    case Distribution::large_scores: return "large_scores";
    case Distribution::near_constant: return "near_constant";
    case Distribution::dominant_key: return "dominant_key";
  }
  return "unknown";
}

std::optional<Distribution> parse_distribution(const std::string& name) {
  return value_named(all_distributions(), name);
}

}  // namespace attnbench
