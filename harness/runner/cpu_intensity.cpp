#include "harness/runner/cpu_intensity.h"

#include <algorithm>
#include <limits>

#include "harness/core/work_count.h"
#include "harness/variant/registry.h"

namespace attnbench {

double lowest_cpu_intensity(const std::vector<Case>& cases) {
  double lowest = std::numeric_limits<double>::infinity();
  for (const Case& c : cases) {
    const auto* variant = Registry::instance().find(c.variant);
    if (variant == nullptr || variant->info.device != Device::cpu) continue;
    const WorkCount work = count_work(c.shape);
    if (work.min_bytes > 0) lowest = std::min(lowest, work.flops / work.min_bytes);
  }
  return lowest;
}

}  // namespace attnbench
