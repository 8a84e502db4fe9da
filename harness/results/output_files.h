// The files a command is told to write, checked before it reads anything: no output is also one
// of its inputs or another output, under any spelling of the name, and an output that exists is
// a regular file (regular_file.h). Each refusal is one std::runtime_error naming the flags.
#pragma once

#include <string>
#include <vector>

namespace attnbench {

// A file named on the command line: its flag ("--out") and its path (empty when not given).
struct FlagPath {
  const char* flag;
  std::string path;
};

// Two of the named files being one would have `command` overwrite its own input, or one output
// the other: refused.
void require_distinct_outputs(const char* command, const std::vector<FlagPath>& outputs,
                              const std::vector<FlagPath>& inputs);

// An output that exists must be a regular file: the rename that puts the result in place would
// replace a FIFO, a device or a link to one (/proc/self/fd/1) with a file.
void require_regular_outputs(const std::vector<FlagPath>& outputs);

}  // namespace attnbench
