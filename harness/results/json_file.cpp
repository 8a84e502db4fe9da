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

std::size_t json_too_deep_at(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_json_depth) return i + 1;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return 0;
}

JsonTooDeep::JsonTooDeep(std::size_t at_byte)
    : std::runtime_error(
          fmt::format("nested more than {} levels deep (at byte {})", max_json_depth, at_byte)),
      byte(at_byte) {}

namespace {

// The line of `text` that holds byte `byte` (from 1; one past the end at an unexpected end).
int64_t line_of_byte(const std::string& text, std::size_t byte) {
  const std::size_t end = std::min<std::size_t>(byte > 0 ? byte - 1 : 0, text.size());
  return 1 + std::count(text.begin(), text.begin() + static_cast<long>(end), '\n');
}

}  // namespace

nlohmann::ordered_json parse_json_text(const std::string& text, const std::string& path) {
  try {
    return parse_json_within_depth<nlohmann::ordered_json>(text);
  } catch (const JsonTooDeep& error) {
    throw std::runtime_error(
        fmt::format("{}:{}: {}", path, line_of_byte(text, error.byte), error.what()));
  } catch (const nlohmann::json::parse_error& error) {
    throw std::runtime_error(fmt::format("{}:{}: not valid JSON ({})", path,
                                         line_of_byte(text, error.byte),
                                         json_syntax_problem(error)));
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
