#include "harness/results/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace attnbench {

namespace {

constexpr const char* temporary_infix = ".tmp.";

[[noreturn]] void fail(const std::string& path, int error) {
  throw std::runtime_error(fmt::format("{}: cannot write: {}", path, std::strerror(error)));
}

// The directory entry of a renamed file is only durable once its directory is synced too.
void sync_directory_of(const std::string& path) {
  std::string directory = std::filesystem::path(path).parent_path().string();
  if (directory.empty()) directory = ".";
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: the data itself is already on disk
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (written == 0) {
      errno = ENOSPC;
      return false;
    }
    bytes.remove_prefix(static_cast<std::size_t>(written));
  }
  return true;
}

void write_file_atomically(const std::string& path, const std::vector<std::string_view>& pieces) {
  std::string temporary = path + temporary_infix + "XXXXXX";
  const int fd = ::mkostemp(temporary.data(), O_CLOEXEC);
  if (fd < 0) fail(path, errno);
  // mkstemp creates the file 0600; a results file should be as readable as any other.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);

  int error = 0;
  for (std::string_view piece : pieces) {
    if (!write_all(fd, piece)) {
      error = errno;
      break;
    }
  }
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error == 0 && std::rename(temporary.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0) {
    ::unlink(temporary.c_str());
    fail(path, error);
  }
  sync_directory_of(path);
}

bool is_leftover_temporary(const std::string& name, const std::string& target) {
  const std::string prefix = target + temporary_infix;
  return name.size() == prefix.size() + 6 && name.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace attnbench
