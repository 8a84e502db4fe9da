#include <fmt/format.h>

#include "harness/registry.h"
int main() {
  for (const auto& v : attnbench::Registry::instance().all()) fmt::print("{}\n", v.info.name);
}
