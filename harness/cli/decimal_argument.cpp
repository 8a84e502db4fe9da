#include "harness/cli/decimal_argument.h"

#include <charconv>
#include <system_error>

namespace attnbench {

DecimalArgument read_decimal_argument(std::string_view text) {
  const bool digits =
      !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
  if (!digits || (text.size() > 1 && text[0] == '0')) return {DecimalKind::not_decimal, 0};
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc()) return {DecimalKind::past_int64, 0};
  return {DecimalKind::number, value};
}

}  // namespace attnbench
