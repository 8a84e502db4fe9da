// Enums read and named by their to_string: the one loop that parses a name, and the one way a
// message lists the names a value may take ("a, b or c"), so neither is written per enum.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace attnbench {

// The value among `all` that to_string names `name`; nullopt for a name none has.
template <class T>
std::optional<T> value_named(const std::vector<T>& all, const std::string& name) {
  for (const T& value : all) {
    if (name == to_string(value)) return value;
  }
  return std::nullopt;
}

// The names of `all`, for a message: "ok, skipped or failed".
template <class T>
std::string names_of(const std::vector<T>& all) {
  std::string text;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i > 0) text += i + 1 == all.size() ? " or " : ", ";
    text += to_string(all[i]);
  }
  return text;
}

}  // namespace attnbench
