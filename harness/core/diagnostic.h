// A line for the user on standard error (a warning, the progress line, an error), written so that
// a stderr that cannot take it (closed, a full disk, a closed pipe) costs that line and nothing
// else. fmt::print(stderr, ...) throws there: a sweep stopped after its first case at the progress
// line, and an error reported while another was being handled aborted the process (status 134).
// The records are the output; what is said about them on stderr may be lost.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <utility>

namespace attnbench {

template <class... Args>
void print_diagnostic(fmt::format_string<Args...> format, Args&&... args) {
  const std::string text = fmt::format(format, std::forward<Args>(args)...);
  static_cast<void>(std::fwrite(text.data(), 1, text.size(), stderr));
}

}  // namespace attnbench
