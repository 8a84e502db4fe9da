// The nesting limit on JSON attnbench reads (harness/results/json_file.h): where text first goes
// past max_json_depth, counting brackets outside strings only.
#include <catch2/catch.hpp>
#include <string>

#include "harness/results/json_file.h"

namespace attnbench {
namespace {

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST_CASE("JSON up to the depth limit passes, one level more is found at its bracket",
          "[results]") {
  CHECK(json_too_deep_at(nested(max_json_depth)) == 0);
  CHECK(json_too_deep_at(nested(max_json_depth + 1)) ==
        static_cast<std::size_t>(max_json_depth + 1));
  // Objects count as arrays do, and a level closed makes room again.
  const std::string wide =
      "{\"a\": " + nested(max_json_depth - 1) + ", \"b\": " + nested(max_json_depth - 1) + "}";
  CHECK(json_too_deep_at(wide) == 0);
  CHECK(json_too_deep_at("{\"a\": " + nested(max_json_depth) + "}") == 6 + max_json_depth);
}

TEST_CASE("brackets inside JSON strings do not count, escaped quotes included", "[results]") {
  const std::string brackets(500, '[');
  CHECK(json_too_deep_at("[\"" + brackets + "\"]") == 0);
  CHECK(json_too_deep_at("[\"a \\\" " + brackets + " \\\\\"]") == 0);
  // After an escaped backslash the quote closes the string: the brackets after it count.
  CHECK(json_too_deep_at("[\"\\\\\"" + nested(max_json_depth) + "]") ==
        static_cast<std::size_t>(5 + max_json_depth));
}

TEST_CASE("parsing refuses too-deep JSON before parsing it, and parses the rest", "[results]") {
  CHECK_THROWS_AS(parse_json_within_depth<nlohmann::json>(nested(100000)), JsonTooDeep);
  CHECK_THROWS_WITH(parse_json_within_depth<nlohmann::json>(nested(70)),
                    "nested more than 64 levels deep (at byte 65)");
  CHECK(parse_json_within_depth<nlohmann::json>("{\"x\": [1, [2]]}")["x"][1][0] == 2);
  CHECK_THROWS_AS(parse_json_within_depth<nlohmann::json>("[1,"), nlohmann::json::parse_error);
}

}  // namespace
}  // namespace attnbench
