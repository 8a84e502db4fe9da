// Text from outside (paths, environment values, manifest fields, the messages of libraries) made
// safe to print on one line: every error attnbench prints is exactly one line, so a crafted value
// can neither break it in two nor forge a second "attnbench: error:" line.
#pragma once

#include <string>
#include <string_view>

namespace attnbench {

// `text` with each control character (below 0x20, and DEL) written as an escape: \n, \r, \t, or
// \xNN; a backslash stays as it is. Bytes of 0x80 and above (UTF-8) pass through.
std::string printable(std::string_view text);

}  // namespace attnbench
