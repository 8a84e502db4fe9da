#include "harness/results/json_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "harness/results/regular_file.h"

namespace attnbench {

std::string json_syntax_problem(const nlohmann::json::exception& error) {
  // The library's message after its own "[json.exception.parse_error.101] parse error at line L,
  // column C: " (or "[json.exception.out_of_range.406] " before "number overflow ...").
  std::string reason = error.what();
  if (const auto column = reason.find("column "); column != std::string::npos) {
    if (const auto colon = reason.find(": ", column); colon != std::string::npos)
      reason = reason.substr(colon + 2);
  } else if (reason.rfind("[json.exception.", 0) == 0) {
    if (const auto bracket = reason.find("] "); bracket != std::string::npos)
      reason = reason.substr(bracket + 2);
  }
  // The library quotes what it read: a literal of a thousand digits stays one readable line.
  constexpr std::size_t longest = 160;
  if (reason.size() > longest) reason = reason.substr(0, longest - 3) + "...";
  return reason;
}

nlohmann::ordered_json parse_json_text(const std::string& text, const std::string& path) {
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    // `byte` counts from 1 and may point one past the end at an unexpected end of input.
    const std::size_t end = std::min<std::size_t>(error.byte > 0 ? error.byte - 1 : 0, text.size());
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(end), '\n');
    throw std::runtime_error(
        fmt::format("{}:{}: not valid JSON ({})", path, line, json_syntax_problem(error)));
  } catch (const nlohmann::json::exception& error) {  // a number past a double's range
    throw std::runtime_error(
        fmt::format("{}: not valid JSON ({})", path, json_syntax_problem(error)));
  }
}

nlohmann::ordered_json read_json_file(const std::string& path, uint64_t max_bytes,
                                      const char* what) {
  return parse_json_text(read_regular_file(path, max_bytes, what), path);
}

}  // namespace attnbench
