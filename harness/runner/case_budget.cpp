#include "harness/runner/case_budget.h"

#include <fmt/format.h>

#include <algorithm>

#include "harness/core/kv_quant.h"
#include "harness/measure/memory_limit.h"
#include "harness/measure/oracle.h"
#include "harness/results/terminal_report.h"

namespace attnbench {

namespace {

// dQ, dK and dV in fp32, for a shape whose pass needs the backward; 0 otherwise.
double gradient_bytes(const Shape& s) {
  if (!needs_backward(s.pass)) return 0;
  return static_cast<double>(s.q_elements() + s.k_elements() + s.v_elements()) * sizeof(float);
}

}  // namespace

double tensor_bytes(const Shape& s) {
  // dO, beside O, when the pass needs the backward.
  const int64_t dout = needs_backward(s.pass) ? s.o_elements() : 0;
  return static_cast<double>(s.q_elements() + s.k_elements() + s.v_elements() + s.o_elements() +
                             dout) *
             static_cast<double>(element_bytes(s.dtype)) +
         gradient_bytes(s);
}

double host_harness_bytes(const Shape& s) {
  const int64_t dout = needs_backward(s.pass) ? s.o_elements() : 0;
  const double fp32_tensors = static_cast<double>(s.q_elements() + s.k_elements() + s.v_elements() +
                                                  s.o_elements() + dout) *
                              sizeof(float);
  // A quantized cache (kv_quantizer.h): the unquantized K and V kept for kv_quant_rel_l2_err,
  // and the codes twice (as quantized, and packed for the variant), with a scale per row at most.
  const auto kv = static_cast<double>(s.k_elements() + s.v_elements());
  const double rows =
      2.0 * static_cast<double>(s.kv_stored_batch() * s.kv_heads * s.kv_stored_rows());
  const double quantized =
      is_quantized(s.kv_dtype) ? kv * sizeof(float) + 2 * kv + 2 * rows * sizeof(float) : 0;
  // The gradients fetched back as fp32 for the oracle, beside those the executor holds, and the
  // oracle's own scratch.
  return fp32_tensors + tensor_bytes(s) + gradient_bytes(s) + quantized + oracle_scratch_bytes(s);
}

std::string over_memory_cap(const MeasureConfig& measure, const Shape& s, double workspace) {
  const double needed = workspace + host_harness_bytes(s);
  const double cap = measure.memory_cap_gb * 1024 * 1024 * 1024;
  if (needed <= cap) return {};
  return fmt::format("needs {} (workspace {}), over memory_cap_gb {}", memory_text(needed),
                     memory_text(workspace), measure.memory_cap_gb);
}

std::string over_time_budget(const TimingOptions& timing, const ObservedCase& seen, double flops) {
  // Time grows with the FLOP count, which is proportional to the query-key pairs.
  const double per_run = seen.seconds_per_run * flops / seen.flops;
  const double timed_runs =
      static_cast<double>(timing.repetitions) * std::max(1.0, timing.min_time_s / per_run);
  const double predicted = per_run * (static_cast<double>(timing.warmup_runs) + 2 + timed_runs);
  if (predicted <= timing.case_budget_s) return {};
  return fmt::format(
      "predicted {} > case_budget_s {} ({} per run, scaled from the previous case by FLOPs)",
      format_duration(predicted), timing.case_budget_s, format_duration(per_run));
}

}  // namespace attnbench
