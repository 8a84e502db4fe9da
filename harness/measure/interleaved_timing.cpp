#include "harness/measure/interleaved_timing.h"

#include <algorithm>
#include <chrono>

namespace attnbench {

std::vector<std::size_t> round_order(std::size_t variants, int64_t /*round*/) {
  // The same order every round: a variant always follows the same neighbour, so whatever one
  // leaves behind (a warm cache, a hot core) is the same in every round and cancels in the ratio
  // of round to round, while the load the rounds meet is shared.
  std::vector<std::size_t> order(variants);
  for (std::size_t i = 0; i < variants; ++i) order[i] = i;
  return order;
}

std::vector<TimingStats> time_interleaved(
    std::size_t variants, const TimingOptions& options,
    const std::function<TimedBatch(std::size_t)>& time_round) {
  std::vector<TimedBatch> batches(variants);
  std::vector<TimingStats> stats(variants);
  // The time allowed is max_time_s per variant, spent together.
  TimingOptions group = options;
  group.max_time_s = options.max_time_s * static_cast<double>(variants);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t round = 0;; ++round) {
    for (std::size_t i : round_order(variants, round)) {
      const TimedBatch batch = time_round(i);
      batches[i].samples_ms.insert(batches[i].samples_ms.end(), batch.samples_ms.begin(),
                                   batch.samples_ms.end());
      batches[i].runs_per_sample = std::max(batches[i].runs_per_sample, batch.runs_per_sample);
      // One mean per round, even if time_round ran more than one repetition.
      double total_ms = 0;
      for (double ms : batch.samples_ms) total_ms += ms;
      batches[i].repetition_means_ms.push_back(total_ms /
                                               static_cast<double>(batch.samples_ms.size()));
    }
    bool all_done = round + 1 >= options.repetitions;
    const double spent =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (std::size_t i = 0; i < variants; ++i) {
      stats[i] = summarise_batches(batches[i], options);
      stats[i].interleaved = true;
      all_done = all_done && sampling_done(stats[i], spent, group);
    }
    if (all_done) return stats;
  }
}

}  // namespace attnbench
