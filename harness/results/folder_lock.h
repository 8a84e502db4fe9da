// An exclusive lock on a results folder, held for as long as a run writes into it: two runs (or
// two --resume) on one folder at once would each append the cases the other is running, and
// the folder would end up with duplicates. flock() on the directory itself: nothing is added to
// the folder, and the kernel drops the lock when the process dies, so a kill never leaves a
// stale lock behind.
#pragma once

#include <string>

namespace attnbench {

class FolderLock {
 public:
  // Locks `directory` (which must exist) or throws std::runtime_error saying another process
  // holds it.
  static FolderLock acquire(const std::string& directory);

  // Whether another process holds `directory`'s lock now (a run still writing it).
  static bool held_elsewhere(const std::string& directory);

  FolderLock() = default;
  FolderLock(FolderLock&& other) noexcept;
  FolderLock& operator=(FolderLock&& other) noexcept;
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  ~FolderLock();

 private:
  explicit FolderLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace attnbench
