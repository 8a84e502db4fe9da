// The one check every file attnbench reads (a config, a .npy input, a results folder's manifest
// and records) or replaces (an output, a folder's files) goes through: it must be a regular file.
// A FIFO would block the open or the read forever, a device such as /dev/zero never ends, and a
// directory reads as nothing; each is refused with a one-line std::runtime_error naming the file.
// The type is checked on the opened descriptor (opened without blocking), so a name swapped
// between a check and the open cannot slip past it; what is read into memory has a size limit.
#pragma once

#include <cstdint>
#include <string>

namespace attnbench {

// A regular file open for reading; closed when it goes out of scope.
class RegularFile {
 public:
  // Opens `path` and checks it is a regular file of at most `max_bytes`; `what` names the file's
  // role in errors ("config file", "records file").
  RegularFile(const std::string& path, uint64_t max_bytes, const char* what);
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile();

  uint64_t size() const { return size_; }
  // Reads exactly `count` bytes at `offset` into `buffer`; throws when the file ends first (it
  // shrank while it was read) or the read fails.
  void read_at(uint64_t offset, char* buffer, uint64_t count) const;
  std::string read_all() const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The whole of a regular file of at most `max_bytes`.
std::string read_regular_file(const std::string& path, uint64_t max_bytes, const char* what);

// Refuses (std::runtime_error) a `path` that exists and is not a regular file once links are
// followed: a FIFO, a device, a directory, a link to /proc/self/fd/1. Writing through
// write_file_atomically() renames over the name, which would replace such a node with a file.
void require_regular_or_absent(const std::string& path);

}  // namespace attnbench
