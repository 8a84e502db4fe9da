#include "harness/variant/registry.h"

#include <algorithm>
#include <stdexcept>

namespace attnbench {

Registry& Registry::instance() {
  static Registry registry;
  return registry;
}

void Registry::add(VariantFactory make) {
  VariantInfo info = make()->info();
  if (find(info.name) != nullptr) {
    throw std::logic_error("two variants registered under the name " + info.name);
  }
  variants_.push_back({std::move(info), std::move(make)});
}

std::vector<RegisteredVariant> Registry::all() const {
  std::vector<RegisteredVariant> sorted = variants_;
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.info.device != b.info.device) return a.info.device < b.info.device;
    return a.info.name < b.info.name;
  });
  return sorted;
}

const RegisteredVariant* Registry::find(const std::string& name) const {
  for (const auto& variant : variants_) {
    if (variant.info.name == name) return &variant;
  }
  return nullptr;
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> result;
  for (const auto& variant : all()) result.push_back(variant.info.name);
  return result;
}

}  // namespace attnbench
