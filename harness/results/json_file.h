// JSON files of a results folder (the manifest, a sweep record) read back: a regular file of
// bounded size, and a syntax error reported as "FILE:LINE: not valid JSON (what is wrong)"
// instead of the JSON library's own message. Every JSON attnbench reads (these files, records
// and producers' descriptions on stdin) is also refused where it nests deeper than
// max_json_depth.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

namespace attnbench {

// How deep JSON attnbench reads may nest arrays and objects. Its own records and manifests nest
// a few levels; the JSON library's serializer and copies recurse once a level, so a record with
// a field nested 80,000 levels deep overflowed the stack (export, merge: a segfault), and a
// producer's description of 6,000 levels (12 KB on stdin) became a 72 MB pretty-printed manifest
// that no reader would then open.
constexpr int max_json_depth = 64;

// Where `text` opens an array or object deeper than max_json_depth: that bracket's byte,
// counted from 1 as the JSON library's parse errors count; 0 where it never does. Brackets in
// strings do not count; text that is not JSON is the parser's to refuse.
std::size_t json_too_deep_at(std::string_view text);

// JSON nested past max_json_depth: "nested more than 64 levels deep (at byte B)".
class JsonTooDeep : public std::runtime_error {
 public:
  explicit JsonTooDeep(std::size_t at_byte);
  std::size_t byte;  // from 1
};

// Json::parse(text), refusing text nested past max_json_depth (JsonTooDeep) before it is parsed.
template <class Json>
Json parse_json_within_depth(const std::string& text) {
  if (const std::size_t at = json_too_deep_at(text); at != 0) throw JsonTooDeep(at);
  return Json::parse(text);
}

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
