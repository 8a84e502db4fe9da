// Variants register themselves at static-initialisation time; the registry lists and builds them.
// Variant object files are linked as an OBJECT library, so the linker never drops a registration.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "harness/variant/variant.h"

namespace attnbench {

using VariantFactory = std::function<std::unique_ptr<Variant>()>;

struct RegisteredVariant {
  VariantInfo info;
  VariantFactory make;
};

class Registry {
 public:
  static Registry& instance();

  // A name registered twice is not an error here, before main, where it could only terminate
  // the program: the second is kept aside and check_names() reports it.
  void add(VariantFactory make);

  // Throws std::runtime_error naming every variant name registered more than once.
  void check_names() const;

  // Sorted by device, then name, so listings and sweeps have a stable order.
  std::vector<RegisteredVariant> all() const;
  // nullptr when no variant has that name.
  const RegisteredVariant* find(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  std::vector<RegisteredVariant> variants_;
  std::vector<std::string> duplicate_names_;
};

template <typename VariantType>
struct VariantRegistration {
  VariantRegistration() {
    Registry::instance().add([] { return std::make_unique<VariantType>(); });
  }
};

}  // namespace attnbench

#define ATTNBENCH_REGISTER_VARIANT(VariantType) \
  static const ::attnbench::VariantRegistration<VariantType> attnbench_registration_##VariantType
