// Whole-file writes that never leave a partial file under the final name: the bytes go to a
// temporary file beside the target (a unique name, so nobody's X.tmp is touched), every write is
// checked, the data is fsync'ed, and only then is the temporary renamed over the target. On any
// failure (a full disk, a file-size limit, a missing directory) the temporary is removed, the
// target keeps its old content, and std::runtime_error says which file and why. A target that
// exists and is not a regular file (a FIFO, a device, a link to one) is refused before anything
// is written: the rename would replace the node itself.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace attnbench {

// Writes the concatenation of `pieces` to `path`.
void write_file_atomically(const std::string& path, const std::vector<std::string_view>& pieces);

inline void write_file_atomically(const std::string& path, std::string_view text) {
  write_file_atomically(path, std::vector<std::string_view>{text});
}

// One file of a write_files_atomically(): its target and the pieces of its content.
struct PendingFile {
  std::string path;
  std::vector<std::string_view> pieces;
};

// Several files that belong together (attend's O and weights): every one is written to its
// temporary and synced first, and the renames follow only when all are complete, so a failure
// while writing any of them leaves every target as it was.
void write_files_atomically(const std::vector<PendingFile>& files);

// True when `name` (a file name, not a path) is a temporary write_file_atomically() left behind
// for `target` when the process was killed mid-write.
bool is_leftover_temporary(const std::string& name, const std::string& target);

// Syncs the directory holding `path`: the entry of a file renamed into it is only durable once
// its directory is synced too (best effort: the data itself is already on disk).
void sync_directory_of(const std::string& path);

// Writes all of `bytes` to `fd`, retrying short writes and EINTR. False (errno set) on failure.
bool write_all(int fd, std::string_view bytes);

}  // namespace attnbench
