#include "harness/measure/memory_limit.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

namespace attnbench {

namespace {

namespace fs = std::filesystem;

// A limit this large means "no limit" (cgroup v1 writes 2^63 rounded down to a page).
constexpr double unlimited = 1e18;

std::optional<double> read_number(const fs::path& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || value >= unlimited) return std::nullopt;
  return value;
}

struct Candidate {
  double bytes;
  std::string what;
};

void keep_least(std::optional<Candidate>& least, double bytes, std::string what) {
  if (bytes < 0) bytes = 0;
  if (!least || bytes < least->bytes) least = Candidate{bytes, std::move(what)};
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, separator)) parts.push_back(part);
  return parts;
}

// A cgroup hierarchy as mounted here: its mount point and the cgroup path mounted there.
struct Mount {
  fs::path point;
  std::string root;
};

// The cgroup v2 mount and the v1 mount of the memory controller, from /proc/self/mountinfo.
void find_cgroup_mounts(std::optional<Mount>& v2, std::optional<Mount>& v1_memory) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    const std::vector<std::string> left = split(line.substr(0, dash), ' ');
    const std::vector<std::string> right = split(line.substr(dash + 3), ' ');
    if (left.size() < 5 || right.size() < 3) continue;
    const Mount mount{left[4], left[3]};
    if (right[0] == "cgroup2" && !v2) v2 = mount;
    if (right[0] == "cgroup" && !v1_memory) {
      for (const std::string& option : split(right[2], ','))
        if (option == "memory") v1_memory = mount;
    }
  }
}

// The folder of `cgroup` (a path from /proc/self/cgroup) under `mount`; empty when not there.
fs::path cgroup_folder(const Mount& mount, const std::string& cgroup) {
  std::string relative = cgroup;
  if (mount.root != "/" && relative.rfind(mount.root, 0) == 0)
    relative = relative.substr(mount.root.size());
  fs::path folder = mount.point / fs::path(relative).relative_path();
  std::error_code error;
  if (!fs::is_directory(folder, error)) return {};
  return folder;
}

// The least headroom over the cgroup at `folder` and each one above it, up to the mount point:
// every level's limit applies.
void cgroup_headroom(const fs::path& folder, const fs::path& mount_point, const char* limit_file,
                     const char* usage_file, std::optional<Candidate>& least) {
  for (fs::path level = folder;; level = level.parent_path()) {
    const std::optional<double> limit = read_number(level / limit_file);
    const std::optional<double> usage = read_number(level / usage_file);
    if (limit && usage) {
      keep_least(
          least, *limit - *usage,
          fmt::format("the cgroup's memory limit {} less {} in use ({})", memory_text(*limit),
                      memory_text(*usage), (level / limit_file).string()));
    }
    if (level == mount_point || level == level.parent_path() || level.empty()) break;
  }
}

void cgroup_limits(std::optional<Candidate>& least) {
  std::optional<Mount> v2, v1_memory;
  find_cgroup_mounts(v2, v1_memory);
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    // "hierarchy-id:controllers:path"; v2 is "0::path".
    const auto first = line.find(':');
    const auto second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (line.compare(0, first, "0") == 0 && controllers.empty() && v2) {
      if (const fs::path folder = cgroup_folder(*v2, path); !folder.empty())
        cgroup_headroom(folder, v2->point, "memory.max", "memory.current", least);
    } else if (v1_memory) {
      for (const std::string& controller : split(controllers, ',')) {
        if (controller != "memory") continue;
        if (const fs::path folder = cgroup_folder(*v1_memory, path); !folder.empty()) {
          cgroup_headroom(folder, v1_memory->point, "memory.limit_in_bytes",
                          "memory.usage_in_bytes", least);
        }
      }
    }
  }
}

// Pages of the address space (field 0) and of data and stack (field 5), from /proc/self/statm.
std::optional<double> mapped_bytes(int field) {
  std::ifstream in("/proc/self/statm");
  double value = 0;
  for (int i = 0; i <= field; ++i)
    if (!(in >> value)) return std::nullopt;
  return value * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

std::optional<Candidate> rlimit_headroom(int resource, const char* name, int statm_field,
                                         const char* mapped_what) {
  struct rlimit limit {};
  if (::getrlimit(resource, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  const auto cap = static_cast<double>(limit.rlim_cur);
  const double mapped = mapped_bytes(statm_field).value_or(0);
  return Candidate{
      std::max(0.0, cap - mapped),
      fmt::format("{} {} less {} {}", name, memory_text(cap), memory_text(mapped), mapped_what)};
}

}  // namespace

std::string memory_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[unit]);
}

MemoryLimit memory_available_now() {
  std::optional<Candidate> least;
  {
    std::ifstream in("/proc/meminfo");
    std::string key;
    double kb = 0;
    while (in >> key) {
      if (key == "MemAvailable:" && in >> kb) {
        keep_least(least, kb * 1024, "the host's available memory (MemAvailable)");
        break;
      }
      in.ignore(1 << 12, '\n');
    }
  }
  cgroup_limits(least);
  // What may still be mapped: the least of the two rlimits' headroom (a private anonymous
  // mapping counts against both).
  std::optional<Candidate> address_space;
  if (auto as = rlimit_headroom(RLIMIT_AS, "RLIMIT_AS", 0, "already mapped")) {
    keep_least(least, as->bytes, as->what);
    keep_least(address_space, as->bytes, std::move(as->what));
  }
  if (auto data = rlimit_headroom(RLIMIT_DATA, "RLIMIT_DATA", 5, "of data already mapped")) {
    keep_least(least, data->bytes, data->what);
    keep_least(address_space, data->bytes, std::move(data->what));
  }
  if (!least) return {};
  MemoryLimit limit;
  limit.bytes = least->bytes;
  limit.what = least->what;
  if (address_space) {
    limit.address_space = address_space->bytes;
    limit.address_space_what = address_space->what;
  }
  return limit;
}

namespace {

// "needs X, but only Y <of memory is available> (<what>)", and why, where X is within Y but over
// the 0.9 of it that may be used.
std::string shortfall_text(const std::string& needs, double needed, const char* available_as,
                           double available, const std::string& what) {
  return fmt::format("needs {}, but only {} {} ({}){}", needs, memory_text(available), available_as,
                     what, needed <= available ? "; a tenth of it is kept spare" : "");
}

}  // namespace

std::string memory_shortfall(double needed, const MemoryLimit& limit, double reserved) {
  if (!limit.what.empty() && needed > 0.9 * limit.bytes)
    return shortfall_text(memory_text(needed), needed, "of memory is available", limit.bytes,
                          limit.what);
  // OpenBLAS spun for ever where its buffers could not be mapped (ulimit -v, ulimit -d): what a
  // library maps for itself is checked before it is asked for.
  if (!limit.address_space_what.empty() && reserved > 0 &&
      needed + reserved > 0.9 * limit.address_space) {
    return shortfall_text(fmt::format("{} and {} its library maps for itself", memory_text(needed),
                                      memory_text(reserved)),
                          needed + reserved, "may still be mapped", limit.address_space,
                          limit.address_space_what);
  }
  return {};
}

}  // namespace attnbench
