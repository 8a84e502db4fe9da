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

#include "harness/results/regular_file.h"

namespace attnbench {

namespace {

constexpr const char* temporary_infix = ".tmp.";

[[noreturn]] void fail(const std::string& path, int error) {
  throw std::runtime_error(fmt::format("{}: cannot write: {}", path, std::strerror(error)));
}

}  // namespace

void sync_directory_of(const std::string& path) {
  std::string directory = std::filesystem::path(path).parent_path().string();
  if (directory.empty()) directory = ".";
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: the data itself is already on disk
  ::fsync(fd);
  ::close(fd);
}

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

namespace {

// Writes `file` to a new temporary beside its target and syncs it; returns the temporary's name.
// On failure the temporary is removed and the error says which target.
std::string write_temporary(const PendingFile& file) {
  std::string temporary = file.path + temporary_infix + "XXXXXX";
  const int fd = ::mkostemp(temporary.data(), O_CLOEXEC);
  if (fd < 0) fail(file.path, errno);
  // mkstemp creates the file 0600; a results file should be as readable as any other.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);

  int error = 0;
  for (std::string_view piece : file.pieces) {
    if (!write_all(fd, piece)) {
      error = errno;
      break;
    }
  }
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) {
    ::unlink(temporary.c_str());
    fail(file.path, error);
  }
  return temporary;
}

}  // namespace

void write_files_atomically(const std::vector<PendingFile>& files) {
  for (const PendingFile& file : files) require_regular_or_absent(file.path);
  std::vector<std::string> temporaries;
  try {
    for (const PendingFile& file : files) temporaries.push_back(write_temporary(file));
  } catch (...) {
    for (const std::string& temporary : temporaries) ::unlink(temporary.c_str());
    throw;
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (std::rename(temporaries[i].c_str(), files[i].path.c_str()) != 0) {
      const int error = errno;
      for (std::size_t j = i; j < files.size(); ++j) ::unlink(temporaries[j].c_str());
      fail(files[i].path, error);
    }
  }
  for (const PendingFile& file : files) sync_directory_of(file.path);
}

void write_file_atomically(const std::string& path, const std::vector<std::string_view>& pieces) {
  write_files_atomically({PendingFile{path, pieces}});
}

bool is_leftover_temporary(const std::string& name, const std::string& target) {
  const std::string prefix = target + temporary_infix;
  return name.size() == prefix.size() + 6 && name.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace attnbench
