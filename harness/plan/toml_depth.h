// A guard run on TOML text before toml++ parses it. toml++ caps arrays and inline tables at 256
// levels but descends once per part of a dotted key (`a.b.c = 1`, `[a.b.c]`, `{ a.b.c = 1 }`), in
// parsing and in freeing the tables: a key of some tens of thousands of parts, well within a
// config's size cap, overflows the stack (SIGSEGV).
#pragma once

#include <string>
#include <string_view>

namespace attnbench {

// The most dots a run of TOML may hold outside strings and comments with none of , = { } [ ] or
// a line break between them: far past any key a config has, while a value holds at most one dot
// per number or date (they are separated by commas).
inline constexpr int kMaxKeyDots = 1000;

// Throws ConfigError ("SOURCE:LINE: a key of more than 1001 dotted parts") where `text` holds a
// longer run. Strings of all four kinds (basic, literal, and their multi-line forms) and comments
// are skipped as toml++ reads them.
void refuse_deep_dotted_keys(std::string_view text, const std::string& source_name);

}  // namespace attnbench
