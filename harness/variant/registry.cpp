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
    duplicate_names_.push_back(info.name);
    return;
  }
  variants_.push_back({std::move(info), std::move(make)});
}

void Registry::check_names() const {
  if (duplicate_names_.empty()) return;
  std::string names;
  for (const std::string& name : duplicate_names_) names += (names.empty() ? "" : ", ") + name;
  throw std::runtime_error("more than one variant is registered under the name " + names +
                           "; rename one (the name is the key in configs and results)");
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
