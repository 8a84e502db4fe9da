#include "harness/cli/decimal_argument.h"

#include <fmt/format.h>

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

std::vector<std::string_view> comma_separated_items(std::string_view list) {
  std::vector<std::string_view> items;
  for (std::size_t start = 0;;) {
    const std::size_t comma = list.find(',', start);
    items.push_back(list.substr(start, comma - start));
    if (comma == std::string_view::npos) return items;
    start = comma + 1;
  }
}

CLI::Validator decimal_list(std::string item) {
  return CLI::Validator(
      [item](std::string& list) -> std::string {
        for (const std::string_view text : comma_separated_items(list)) {
          switch (read_decimal_argument(text).kind) {
            case DecimalKind::number: continue;
            case DecimalKind::past_int64:
              return fmt::format("{} {} is past int64 (at most 2^63 - 1)", item, text);
            case DecimalKind::not_decimal: break;
          }
          return fmt::format("a {} is a decimal number, got '{}'{}", item, text,
                             text.empty() ? fmt::format(" (an empty item in '{}')", list) : "");
        }
        return "";
      },
      "INT[,INT...]");
}

std::vector<int64_t> decimal_list_values(const std::vector<std::string>& lists) {
  std::vector<int64_t> values;
  for (const std::string& list : lists)
    for (const std::string_view text : comma_separated_items(list))
      values.push_back(read_decimal_argument(text).value);
  return values;
}

}  // namespace attnbench
