#include "harness/measure/checked_run.h"

#include <fmt/format.h>

#include <exception>

namespace attnbench {

OracleReport run_checked(Variant& variant, Executor& executor, const HostTensors& inputs,
                         float scale, bool with_weights, const OracleOptions& options) {
  std::vector<float> o, weights;
  try {
    executor.load(inputs, with_weights);
    executor.poison_outputs();
    executor.timed_run_ms(variant, executor.problem(scale));
    executor.fetch_outputs(o, with_weights ? &weights : nullptr);
  } catch (const DeviceLostError&) {
    throw;  // the sweep must stop, not record one failure and carry on with a dead context
  } catch (const std::exception& error) {
    // The variant is named: a record's reason is read on its own, in a list of failures.
    OracleReport report;
    report.failure = fmt::format("run failed: variant {}: {}", variant.info().name, error.what());
    return report;
  }
  return check_against_reference(inputs, scale, o, with_weights ? &weights : nullptr,
                                 variant.info().capabilities.precision, options);
}

}  // namespace attnbench
