#include "harness/measure/checked_run.h"

#include <fmt/format.h>

#include <exception>

#include "harness/measure/backward_oracle.h"

namespace attnbench {

OracleReport run_checked(Variant& variant, Executor& executor, const HostTensors& inputs,
                         float scale, bool with_weights, const OracleOptions& options) {
  std::vector<float> o, weights;
  Gradients<float> gradients;
  try {
    executor.load(inputs, with_weights);
    executor.poison_outputs();
    executor.timed_run_ms(variant, executor.problem(scale));
    executor.fetch_outputs(o, with_weights ? &weights : nullptr);
    executor.fetch_gradients(gradients.dq, gradients.dk, gradients.dv);
  } catch (const DeviceLostError&) {
    throw;  // the sweep must stop, not record one failure and carry on with a dead context
  } catch (const std::exception& error) {
    // The variant is named: a record's reason is read on its own, in a list of failures.
    OracleReport report;
    report.failure = fmt::format("run failed: variant {}: {}", variant.info().name, error.what());
    return report;
  }
  const Precision precision = variant.info().capabilities.precision;
  OracleReport forward = check_against_reference(
      inputs, scale, o, with_weights ? &weights : nullptr, precision, options);
  // A backward case checks the forward it ran, then the gradients; the report is the gradients'.
  if (!forward.passed || !needs_backward(inputs.shape.pass)) return forward;
  // The gradients' reference takes D from the O this backward read (backward_oracle.h).
  return check_gradients(inputs, scale, gradients, o, precision, options);
}

}  // namespace attnbench
