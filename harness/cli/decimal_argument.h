// A count or index given on the command line, read as the decimal number a user typed. CLI11's
// integer conversion is strtoll's base 0: a leading 0 is octal ("010" is 8), "0x10" is 16, a sign
// and spaces pass, and a number past int64 is clamped to its largest value, each of which would
// run something nobody asked for. The options that take counts and indices (run --cases, slurm
// --shards, --gpus, --cpus-per-task, attend --doc-lens) check their text with this first.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attnbench {

// What the text is: a decimal number within int64 (digits only, no leading zero but "0"
// itself), digits past int64, or anything else.
enum class DecimalKind { number, past_int64, not_decimal };

struct DecimalArgument {
  DecimalKind kind = DecimalKind::not_decimal;
  int64_t value = 0;  // the number, when kind is number
};

DecimalArgument read_decimal_argument(std::string_view text);

// The items of a comma-separated list as typed, empty ones kept: "0,,4" -> {"0", "", "4"}. Lists
// of numbers are split here, not by CLI11's delimiter, which drops empty items: "0,,4" or "0,"
// would run without a word about the number missing.
std::vector<std::string_view> comma_separated_items(std::string_view list);

// A CLI11 check of a comma-separated list of decimal numbers; `item` names one ("case index").
CLI::Validator decimal_list(std::string item);

// The numbers of lists that decimal_list passed, in order.
std::vector<int64_t> decimal_list_values(const std::vector<std::string>& lists);

}  // namespace attnbench
