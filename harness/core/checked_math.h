// int64 arithmetic that reports overflow instead of wrapping. Sizes come from users (a config's
// axes, a .npy header): a product that wraps turns into a small or negative size, and the
// allocation or loop built on it crashes. Every product of user-given sizes goes through here.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>

namespace attnbench {

// a + b, or nothing when the sum does not fit in int64.
inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
}

// a · b, or nothing when the product does not fit in int64.
inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

// The product of [first, last), or nothing when any partial product overflows. 1 when empty.
template <typename Iterator>
std::optional<int64_t> checked_product(Iterator first, Iterator last) {
  int64_t product = 1;
  for (; first != last; ++first) {
    const std::optional<int64_t> next = checked_mul(product, static_cast<int64_t>(*first));
    if (!next) return std::nullopt;
    product = *next;
  }
  return product;
}

inline std::optional<int64_t> checked_product(std::initializer_list<int64_t> factors) {
  return checked_product(factors.begin(), factors.end());
}

}  // namespace attnbench
