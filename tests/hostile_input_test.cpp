// The defences against hostile or damaged input, one piece at a time: checked int64 arithmetic,
// the .npy header parser, whole-file writes, the results-folder lock, the record schema, and the
// config limits. The end-to-end reproductions are in tests/python/test_cli_hostile.py.
#include <fmt/format.h>
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "harness/core/checked_math.h"
#include "harness/core/shape.h"
#include "harness/plan/config.h"
#include "harness/results/atomic_file.h"
#include "harness/results/folder_lock.h"
#include "harness/results/npy_format.h"
#include "harness/results/npy_io.h"
#include "harness/results/record_check.h"
#include "harness/results/run_folder.h"

namespace attnbench {
namespace {

namespace fs = std::filesystem;

std::string fresh_path(const std::string& name) {
  static std::mt19937_64 rng(std::random_device{}());
  const fs::path path = fs::temp_directory_path() / fmt::format("attnbench-{}-{:x}", name, rng());
  fs::remove_all(path);
  return path.string();
}

std::string npy_bytes(const std::string& dict) {
  std::string header = dict;
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY\x01";
  bytes += '\0';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  return bytes + header;
}

TEST_CASE("checked int64 arithmetic reports overflow instead of wrapping", "[hostile]") {
  constexpr int64_t max = std::numeric_limits<int64_t>::max();
  CHECK(checked_add(max - 1, 1) == max);
  CHECK_FALSE(checked_add(max, 1));
  CHECK(checked_mul(3037000499, 3037000499));
  CHECK_FALSE(checked_mul(4611686018427387904, 4));
  CHECK(checked_product({1, 4, 1, 4611686018427387903}) == std::nullopt);
  CHECK(checked_product({2, 3, 7}) == 42);
  CHECK(checked_product({}) == 1);
}

TEST_CASE("a shape whose element count overflows int64 is invalid, not wrapped", "[hostile]") {
  Shape s;
  s.heads = s.kv_heads = 4;
  s.seq_q = s.seq_kv = 16;
  s.d_k = s.d_v = 4611686018427387904;
  CHECK_THAT(validate(s), Catch::Contains("shape too large"));
}

TEST_CASE(".npy headers: every field checked before anything is allocated", "[hostile]") {
  const std::string ok = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  const NpyHeader header = parse_npy_header(ok);
  CHECK(header.shape == std::vector<int64_t>{2, 3});
  CHECK(header.data_bytes == 24);
  CHECK(header.data_offset % 64 == 0);

  const std::pair<const char*, const char*> bad[] = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4, 1, 4611686018427387904), }",
       "more elements than can be counted"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
       "does not fit in int64"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", "'<f8'"},
      {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", "fortran_order"},
      {"{'descr': '<f4', 'shape': (2,), }", "lacks one of"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", "not a tuple of sizes"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", "unexpected key"},
  };
  for (const auto& [dict, expected] : bad) {
    INFO(dict);
    CHECK_THROWS_WITH(parse_npy_header(npy_bytes(dict)), Catch::Contains(expected));
  }
  CHECK_THROWS_AS(parse_npy_header("\x93NUMPY"), NpyFormatError);
  CHECK_THROWS_AS(parse_npy_header(ok.substr(0, 20)), NpyFormatError);
  CHECK_THROWS_WITH(decode_npy(ok + std::string(23, '\0'), "x.npy"),
                    Catch::Contains("x.npy: ") && Catch::Contains("truncated"));
}

TEST_CASE(".npy round trip, and Fortran order read as row-major", "[hostile]") {
  NpyTensor tensor{{2, 3}, {0, 1, 2, 3, 4, 5}};
  const std::string path = fresh_path("npy") + ".npy";
  save_npy(path, tensor);
  const NpyTensor back = load_npy(path);
  CHECK(back.shape == tensor.shape);
  CHECK(back.data == tensor.data);
  fs::remove(path);

  // Column-major [[0, 1, 2], [3, 4, 5]] is 0 3 1 4 2 5 on disk.
  std::string fortran = npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }");
  for (float x : {0.f, 3.f, 1.f, 4.f, 2.f, 5.f})
    fortran.append(reinterpret_cast<const char*>(&x), sizeof x);
  CHECK(decode_npy(fortran, "f").data == tensor.data);
}

// Runs `body` with writes past `bytes` failing (EFBIG), as a full disk would make them fail.
template <typename Body>
void with_file_size_limit(rlim_t bytes, Body body) {
  rlimit saved{};
  getrlimit(RLIMIT_FSIZE, &saved);
  auto* const previous = std::signal(SIGXFSZ, SIG_IGN);
  rlimit limited = saved;
  limited.rlim_cur = bytes;
  setrlimit(RLIMIT_FSIZE, &limited);
  try {
    body();
  } catch (...) {
    setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, previous);
    throw;
  }
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previous);
}

TEST_CASE("a failed write leaves the old file and no temporary behind", "[hostile]") {
  const std::string folder = fresh_path("atomic");
  fs::create_directories(folder);
  const std::string target = folder + "/out.npy";
  std::ofstream(target) << "old";
  std::ofstream(target + ".tmp") << "someone else's";
  with_file_size_limit(1000, [&] {
    CHECK_THROWS_WITH(write_file_atomically(target, std::string(5000, 'x')),
                      Catch::Contains("out.npy: cannot write: File too large"));
  });
  std::stringstream text;
  text << std::ifstream(target).rdbuf();
  CHECK(text.str() == "old");
  int entries = 0;
  for (const auto& entry : fs::directory_iterator(folder)) entries += entry.exists();
  CHECK(entries == 2);  // out.npy and the untouched out.npy.tmp
  write_file_atomically(target, "new");
  CHECK(fs::file_size(target) == 3);
  fs::remove_all(folder);
}

TEST_CASE("a results folder is locked while a run holds it", "[hostile]") {
  const std::string path = fresh_path("lock");
  {
    RunFolder first = RunFolder::create(path, {{"name", "t"}});
    CHECK_THROWS_WITH(RunFolder::open_existing(path), Catch::Contains("in use by another"));
    CHECK_THROWS_WITH(FolderLock::acquire(path), Catch::Contains("in use by another"));
  }
  CHECK_NOTHROW(RunFolder::open_existing(path));
  fs::remove_all(path);
}

TEST_CASE("a folder whose manifest write failed can be used again", "[hostile]") {
  const std::string path = fresh_path("manifest-full");
  with_file_size_limit(100, [&] {
    RunFolder folder = RunFolder::create(path);
    CHECK_THROWS_WITH(folder.write_manifest({{"padding", std::string(1000, 'x')}}),
                      Catch::Contains("manifest.json: cannot write"));
  });
  std::ofstream(fs::path(path) / "manifest.json.tmp") << "left by an older version";
  RunFolder again = RunFolder::create(path, {{"name", "t"}});
  CHECK(fs::exists(fs::path(path) / "manifest.json"));
  CHECK_FALSE(fs::exists(fs::path(path) / "manifest.json.tmp"));
  fs::remove_all(path);
}

TEST_CASE("records that are JSON but not records are named, with what is wrong", "[hostile]") {
  CHECK(record_schema_problem(nlohmann::ordered_json::parse("[1,2]")) ==
        "a record must be a JSON object");
  CHECK(record_schema_problem(nlohmann::ordered_json::parse(R"({"foo":1})")) ==
        "missing 'case_index'");
  const auto ok = nlohmann::ordered_json::parse(
      R"({"case_index":0,"case_id":"a","variant":"naive","status":"ok","flops":1,"time_ms_median":2})");
  CHECK(record_schema_problem(ok).empty());
  for (const char* key : {"variant", "flops", "time_ms_median"}) {
    auto damaged = ok;
    damaged.erase(key);
    CHECK(record_schema_problem(damaged) == fmt::format("missing '{}'", key));
  }
  auto wrong_status = ok;
  wrong_status["status"] = "done";
  CHECK_THAT(record_schema_problem(wrong_status), Catch::Contains("'status' is 'done'"));
}

TEST_CASE("config limits: ranges, counts and names", "[hostile]") {
  const std::string head = "name = \"x\"\nvariants = [\"naive\"]\n[axes]\n";
  auto error = [&](const std::string& body, std::vector<std::string> overrides = {}) {
    try {
      parse_config(head + body, "t.toml", overrides);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error("seq_len = {from = 1, to = 20000, step = 1}\n"),
             Catch::Contains("more than 10000 values"));
  CHECK(parse_config(head + "seq_len = {from = 1, to = 9223372036854775807, step = "
                            "9223372036854775807}\n",
                     "t.toml")
            .axes.values("seq_len")
            .size() == 1);
  const auto geometric =
      parse_config(head + "seq_len = {from = 3, to = 9223372036854775807, mul = 3}\n", "t.toml");
  for (int64_t value : geometric.axes.values_of<int64_t>("seq_len")) CHECK(value > 0);
  CHECK_THAT(error("seq_len = [16]\n", {"measure.repetitions=4294967296"}),
             Catch::Contains("measure.repetitions: must be an integer in [1, 100000]"));
  CHECK_THAT(error("seq_len = [16]\n", {"measure.warmup=9999999999999"}),
             Catch::Contains("measure.warmup: must be an integer in [0, 1000000]"));
  CHECK_THAT(error("seq_len = [16]\n", {"name=\"a\\u0000b\""}),
             Catch::Contains("name: must be non-empty with no spaces, slashes or control"));
}

}  // namespace
}  // namespace attnbench
