// A sweep: the config's axes expanded into cases (their cartesian product, lockstep constraints
// applied), for each variant, in a fixed order so shards and resumed runs agree on it.
#pragma once

#include <string>
#include <vector>

#include "harness/core/case.h"
#include "harness/core/shape.h"
#include "harness/plan/config.h"

namespace attnbench {

// Expands names and the groups "cpu", "cuda", "all" into registered variant names, in order,
// without duplicates. Throws ConfigError naming an unknown variant and listing the known ones.
std::vector<std::string> resolve_variants(const std::vector<std::string>& requested);

// More shapes than this in one sweep is a config error (a range with a tiny step, say).
inline constexpr int64_t max_sweep_shapes = 1000000;
// Nor more cases (shapes times variants) than this.
inline constexpr int64_t max_sweep_cases = 100000;

// Every (variant, shape) of the sweep. Throws ConfigError for an impossible shape (e.g. heads not
// a multiple of kv_heads, tokens not a multiple of seq_q), naming the values.
std::vector<Case> expand_cases(const SweepConfig& config, const std::vector<std::string>& variants);

// "I/N": the cases whose index is I modulo N (0 <= I < N). Throws ConfigError if malformed.
struct Shard {
  int64_t index = 0;
  int64_t count = 1;
};
Shard parse_shard(const std::string& text);
// parse_shard for --shard as the user typed it: only I/N as it is printed (no sign, no leading
// zero), since a resume compares the text a manifest keeps.
Shard parse_shard_option(const std::string& text);
std::vector<Case> select_shard(const std::vector<Case>& cases, const Shard& shard);

// The planned cases of the given indices (`run --cases`), in plan order; an index the plan (or the
// shard) does not hold is refused by name (ConfigError).
std::vector<Case> select_cases(const std::vector<Case>& planned,
                               const std::vector<int64_t>& indices);

}  // namespace attnbench
