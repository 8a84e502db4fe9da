#include "harness/measure/attend_memory.h"

#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "harness/core/dtype.h"
#include "harness/core/pass.h"
#include "harness/measure/memory_limit.h"

namespace attnbench {

double fp32_bytes(double elements) { return elements * static_cast<double>(sizeof(float)); }

double fp32_weights_bytes(const Shape& s) {
  return fp32_bytes(static_cast<double>(s.batch) * static_cast<double>(s.heads) *
                    static_cast<double>(s.seq_q) * static_cast<double>(s.seq_kv));
}

void require_attend_memory(const Shape& s, const VariantInfo& variant, std::size_t workspace,
                           bool with_weights, std::size_t reserved) {
  const bool backward = needs_backward(s.pass);
  const int64_t inputs = s.q_elements() + s.k_elements() + s.v_elements();
  const double dtype_bytes = static_cast<double>(element_bytes(s.dtype));
  const double weights = with_weights ? 2 * fp32_weights_bytes(s) : 0.0;
  const double host_workspace =
      variant.device == Device::cpu ? static_cast<double>(workspace) : 0.0;
  const double gradients = backward ? 2 * fp32_bytes(static_cast<double>(s.o_elements() + inputs)) +
                                          static_cast<double>(s.o_elements()) * dtype_bytes
                                    : 0.0;
  const double tensors = fp32_bytes(static_cast<double>(inputs)) +
                         static_cast<double>(inputs + s.o_elements()) * dtype_bytes +
                         fp32_bytes(static_cast<double>(s.o_elements())) + gradients;
  const double needed = host_workspace + tensors + weights;
  const std::string shortfall =
      memory_shortfall(needed, memory_available_now(), static_cast<double>(reserved));
  if (shortfall.empty()) return;
  throw std::runtime_error(fmt::format("{}: {} {} (workspace {}, tensors {}{})", variant.name,
                                       describe(s), shortfall, memory_text(host_workspace),
                                       memory_text(tensors),
                                       with_weights ? ", weights " + memory_text(weights) : ""));
}

}  // namespace attnbench
