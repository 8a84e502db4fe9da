#include "harness/results/regular_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace attnbench {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw std::runtime_error(fmt::format("{}: {}", path, problem));
}

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

}  // namespace

RegularFile::RegularFile(const std::string& path, uint64_t max_bytes, const char* what)
    : path_(path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd_ < 0) fail(path, fmt::format("cannot open {}: {}", what, std::strerror(errno)));
  struct stat status {};
  if (::fstat(fd_, &status) != 0) {
    const int error = errno;
    ::close(fd_);
    fail(path, fmt::format("cannot open {}: {}", what, std::strerror(error)));
  }
  if (!S_ISREG(status.st_mode)) {
    ::close(fd_);
    fail(path, fmt::format("is {}, not a regular file, so not read as a {}",
                           kind_of(status.st_mode), what));
  }
  size_ = static_cast<uint64_t>(status.st_size);
  if (size_ > max_bytes) {
    ::close(fd_);
    fail(path, fmt::format("{} bytes is too large for a {} (at most {})", size_, what, max_bytes));
  }
  // Back to blocking reads: a regular file never blocks, and this keeps read() plain.
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

void RegularFile::read_at(uint64_t offset, char* buffer, uint64_t count) const {
  while (count > 0) {
    const ssize_t got = ::pread(fd_, buffer, count, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      fail(path_, fmt::format("cannot read: {}", std::strerror(errno)));
    }
    if (got == 0) fail(path_, "truncated (the file shrank while it was read)");
    buffer += got;
    offset += static_cast<uint64_t>(got);
    count -= static_cast<uint64_t>(got);
  }
}

std::string RegularFile::read_all() const {
  std::string text(size_, '\0');
  read_at(0, text.data(), size_);
  return text;
}

std::string read_regular_file(const std::string& path, uint64_t max_bytes, const char* what) {
  return RegularFile(path, max_bytes, what).read_all();
}

void require_regular_or_absent(const std::string& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) {
    if (errno == ENOENT) {
      // A dangling link would be replaced by the rename: fine, it names nothing.
      return;
    }
    fail(path, fmt::format("cannot write: {}", std::strerror(errno)));
  }
  if (!S_ISREG(status.st_mode)) {
    fail(path, fmt::format("exists and is {}, not a regular file, so it is not replaced",
                           kind_of(status.st_mode)));
  }
}

}  // namespace attnbench
