// A count or index given on the command line, read as the decimal number a user typed. CLI11's
// integer conversion is strtoll's base 0: a leading 0 is octal ("010" is 8), "0x10" is 16, a sign
// and spaces pass, and a number past int64 is clamped to its largest value, each of which would
// run something nobody asked for. The options that take counts and indices (run --cases, slurm
// --shards, --gpus, --cpus-per-task) check their text with this first.
#pragma once

#include <cstdint>
#include <string_view>

namespace attnbench {

// What the text is: a decimal number within int64 (digits only, no leading zero but "0"
// itself), digits past int64, or anything else.
enum class DecimalKind { number, past_int64, not_decimal };

struct DecimalArgument {
  DecimalKind kind = DecimalKind::not_decimal;
  int64_t value = 0;  // the number, when kind is number
};

DecimalArgument read_decimal_argument(std::string_view text);

}  // namespace attnbench
