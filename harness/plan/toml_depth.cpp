#include "harness/plan/toml_depth.h"

#include <fmt/format.h>

#include <cstdint>

#include "harness/plan/config.h"

namespace attnbench {

namespace {

// Reads `text` once, line by line: where a string or comment starts, it is passed over whole (a
// multi-line string across its lines, an escape never past a line break), and every other
// character either adds to the current run of dots or, as a separator, ends it.
class DottedKeyScan {
 public:
  DottedKeyScan(std::string_view text, const std::string& source_name)
      : text_(text), source_name_(source_name) {}

  void run() {
    while (at_ < text_.size()) {
      const char c = text_[at_];
      if (c == '"' || c == '\'') {
        skip_string(c);
      } else if (c == '#') {
        while (at_ < text_.size() && text_[at_] != '\n') ++at_;
      } else {
        if (c == '\n') ++line_;
        if (c == '.') {
          if (++dots_ > kMaxKeyDots) {
            throw ConfigError(fmt::format("{}:{}: a key of more than {} dotted parts", source_name_,
                                          line_, kMaxKeyDots + 1));
          }
        } else if (c == ',' || c == '=' || c == '{' || c == '}' || c == '[' || c == ']' ||
                   c == '\n') {
          dots_ = 0;
        }
        ++at_;
      }
    }
  }

 private:
  bool starts_with(std::string_view what) const { return text_.substr(at_, what.size()) == what; }

  // From the opening quote to past the closing one (or the end of the text: toml++ then reports
  // the unterminated string).
  void skip_string(char quote) {
    const bool basic = quote == '"';
    const std::string_view triple = basic ? "\"\"\"" : "'''";
    const bool multi_line = starts_with(triple);
    at_ += multi_line ? 3 : 1;
    while (at_ < text_.size()) {
      const char c = text_[at_];
      if (multi_line && starts_with(triple)) {
        at_ += 3;
        // Up to two more quotes close a multi-line string as its content (""""" ends in "").
        for (int extra = 0; extra < 2 && at_ < text_.size() && text_[at_] == quote; ++extra) ++at_;
        return;
      }
      if (!multi_line && c == quote) {
        ++at_;
        return;
      }
      if (c == '\n') {
        ++line_;
        if (!multi_line) {  // toml++ refuses the string; the scan goes on from the next line
          ++at_;
          dots_ = 0;
          return;
        }
      }
      // A basic string's escape takes the next character, unless that is a line break (a
      // line-ending backslash of a multi-line string), which the loop counts.
      if (basic && c == '\\' && at_ + 1 < text_.size() && text_[at_ + 1] != '\n') ++at_;
      ++at_;
    }
  }

  std::string_view text_;
  const std::string& source_name_;
  std::size_t at_ = 0;
  int64_t line_ = 1;
  int dots_ = 0;
};

}  // namespace

void refuse_deep_dotted_keys(std::string_view text, const std::string& source_name) {
  DottedKeyScan(text, source_name).run();
}

}  // namespace attnbench
