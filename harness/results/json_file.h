// JSON files of a results folder (the manifest, a sweep record) read back: a regular file of
// bounded size, and a syntax error reported as "FILE:LINE: not valid JSON (what is wrong)"
// instead of the JSON library's own message.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace attnbench {

// What a syntax error is, without the library's "parse error at line L, column C: " prefix:
// "syntax error while parsing value - invalid literal; last read: 'NaN'", "number overflow
// parsing '1e400'".
std::string json_syntax_problem(const nlohmann::json::exception& error);

// Parses `text`, the contents of `path`; errors name `path` and the line.
nlohmann::ordered_json parse_json_text(const std::string& text, const std::string& path);

// read_regular_file() and parse_json_text().
nlohmann::ordered_json read_json_file(const std::string& path, uint64_t max_bytes,
                                      const char* what);

}  // namespace attnbench
