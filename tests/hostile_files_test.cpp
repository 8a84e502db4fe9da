// The second round of defences, one piece at a time: control characters escaped in messages, JSON
// errors named by file and line, the regular-file check, several files written all or nothing, and
// the memory a process may still allocate. The end-to-end reproductions are in
// tests/python/test_cli_limits_and_files.py.
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>

#include "harness/cli/printable.h"
#include "harness/measure/memory_limit.h"
#include "harness/results/atomic_file.h"
#include "harness/results/json_file.h"
#include "harness/results/regular_file.h"

namespace attnbench {
namespace {

namespace fs = std::filesystem;

fs::path fresh_folder(const std::string& name) {
  static std::mt19937_64 rng(std::random_device{}());
  const fs::path path = fs::temp_directory_path() / fmt::format("attnbench-{}-{:x}", name, rng());
  fs::remove_all(path);
  fs::create_directories(path);
  return path;
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_CASE("control characters are escaped, everything else kept", "[hostile]") {
  CHECK(printable("a\nattnbench: error: b") == "a\\nattnbench: error: b");
  CHECK(printable(std::string("\t\r\x1b[2J\x7f\0", 8)) == "\\t\\r\\x1b[2J\\x7f\\x00");
  CHECK(printable("caf\xc3\xa9 C:\\x") == "caf\xc3\xa9 C:\\x");
}

TEST_CASE("a JSON syntax error names the file and the line", "[hostile]") {
  CHECK_THROWS_WITH(parse_json_text("{\n  \"a\": 1,\n  \"b\": \n}\n", "m.json"),
                    Catch::StartsWith("m.json:4: not valid JSON (syntax error"));
  CHECK_THROWS_WITH(
      parse_json_text("{\"a\": [1, 2", "m.json"),
      Catch::StartsWith("m.json:1: not valid JSON") && !Catch::Contains("json.exception"));
  CHECK(parse_json_text("{\"a\": 1}", "m.json")["a"] == 1);
}

TEST_CASE("only regular files are read, never waited on, and only up to a size", "[hostile]") {
  const fs::path folder = fresh_folder("regular");
  const std::string fifo = (folder / "fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(
      read_regular_file(fifo, 100, "records file"),
      Catch::Contains("is a FIFO, not a regular file, so not read as a records file"));
  CHECK_THROWS_WITH(read_regular_file("/dev/zero", 100, "records file"),
                    Catch::Contains("is a character device"));
  CHECK_THROWS_WITH(read_regular_file(folder.string(), 100, "records file"),
                    Catch::Contains("is a directory"));
  std::ofstream(folder / "text") << "0123456789";
  CHECK(read_regular_file((folder / "text").string(), 10, "records file") == "0123456789");
  CHECK_THROWS_WITH(read_regular_file((folder / "text").string(), 9, "records file"),
                    Catch::Contains("10 bytes is too large for a records file (at most 9)"));
  fs::remove_all(folder);
}

TEST_CASE("a target that is not a regular file is refused, not replaced", "[hostile]") {
  const fs::path folder = fresh_folder("special-target");
  const std::string fifo = (folder / "o.npy").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(write_file_atomically(fifo, "data"), Catch::Contains("exists and is a FIFO"));
  CHECK(fs::is_fifo(fifo));
  fs::create_symlink("/dev/null", folder / "null.npy");
  CHECK_THROWS_WITH(write_file_atomically((folder / "null.npy").string(), "data"),
                    Catch::Contains("is a character device"));
  CHECK(fs::is_symlink(folder / "null.npy"));
  fs::remove_all(folder);
}

TEST_CASE("files written together are renamed only when every one is complete", "[hostile]") {
  const fs::path folder = fresh_folder("together");
  std::ofstream(folder / "o.npy") << "old O";
  std::ofstream(folder / "w.npy") << "old W";
  const std::string large(64 * 1024, 'w');
  struct rlimit saved {};
  ::getrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limit = saved;
  limit.rlim_cur = 8000;
  ::setrlimit(RLIMIT_FSIZE, &limit);
  CHECK_THROWS_WITH(write_files_atomically({{(folder / "o.npy").string(), {"new O"}},
                                            {(folder / "w.npy").string(), {large}}}),
                    Catch::Contains("w.npy: cannot write"));
  ::setrlimit(RLIMIT_FSIZE, &saved);
  CHECK(read(folder / "o.npy") == "old O");
  CHECK(read(folder / "w.npy") == "old W");
  CHECK(std::distance(fs::directory_iterator(folder), fs::directory_iterator()) == 2);
  write_files_atomically(
      {{(folder / "o.npy").string(), {"new O"}}, {(folder / "w.npy").string(), {"new W"}}});
  CHECK(read(folder / "o.npy") == "new O");
  CHECK(read(folder / "w.npy") == "new W");
  fs::remove_all(folder);
}

TEST_CASE("the memory limit takes the address-space rlimit into account", "[hostile]") {
  const MemoryLimit before = memory_available_now();
  REQUIRE(before.bytes > 0);  // every Linux has MemAvailable
  CHECK(memory_shortfall(before.bytes * 0.5, before).empty());
  CHECK_THAT(memory_shortfall(before.bytes * 2, before), Catch::StartsWith("needs "));
  CHECK_THAT(memory_shortfall(before.bytes * 2, before), !Catch::Contains("kept spare"));
  // Within the memory but over 0.9 of it: "needs 1.0 GiB, but only 1.1 GiB" says why.
  CHECK_THAT(memory_shortfall(before.bytes * 0.95, before),
             Catch::EndsWith("; a tenth of it is kept spare"));

  struct rlimit saved {};
  ::getrlimit(RLIMIT_AS, &saved);
  // A limit 64 MiB above what is mapped now: the least of all, whatever the host has.
  struct rlimit limit = saved;
  std::ifstream statm("/proc/self/statm");
  double pages = 0;
  statm >> pages;
  limit.rlim_cur = static_cast<rlim_t>(pages * static_cast<double>(::sysconf(_SC_PAGESIZE))) +
                   (rlim_t{64} << 20);
  REQUIRE(::setrlimit(RLIMIT_AS, &limit) == 0);
  struct rlimit applied {};
  ::getrlimit(RLIMIT_AS, &applied);
  const MemoryLimit limited = memory_available_now();
  ::setrlimit(RLIMIT_AS, &saved);
  if (applied.rlim_cur != limit.rlim_cur) {
    // qemu-user accepts RLIMIT_AS and drops it (the limit would bound the emulator, not the
    // program), so there is no limit to see.
    WARN(
        "SKIPPED the RLIMIT_AS check: setrlimit(RLIMIT_AS) took no effect here (e.g. under "
        "qemu-user)");
    return;
  }
  CHECK_THAT(limited.what, Catch::StartsWith("RLIMIT_AS"));
  CHECK(limited.bytes < 80.0 * (1 << 20));
  CHECK_THAT(memory_shortfall(200.0 * (1 << 20), limited),
             Catch::Contains("needs 200.0 MiB, but only") && Catch::Contains("RLIMIT_AS"));
}

}  // namespace
}  // namespace attnbench
