// The run-time-to-template switches of the CUDA launch sites (harness/cuda/dispatch.h), checked on
// the host: each value reaches exactly the instantiation named by it, and a value with no
// instantiation calls nothing and becomes a one-line error naming the variant.
#include "harness/cuda/dispatch.h"

#include <catch2/catch.hpp>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace attnbench {
namespace {

TEST_CASE("with_one_of calls the matching instantiation once", "[cuda][dispatch]") {
  for (const int value : {4, 16}) {
    std::vector<int> called;
    CHECK(dispatch::with_one_of<4, 16>(value, [&](auto rows) {
      static_assert(std::is_same_v<decltype(decltype(rows)::value), const int>);
      called.push_back(decltype(rows)::value);
    }));
    CHECK(called == std::vector<int>{value});
  }
  int calls = 0;
  CHECK_FALSE(dispatch::with_one_of<4, 16>(8, [&](auto) { ++calls; }));
  CHECK(calls == 0);
}

TEST_CASE("with_head_dim hands over the bucket or names the variant", "[cuda][dispatch]") {
  for (const int bucket : {32, 64, 128}) {
    int got = 0;
    dispatch::with_head_dim<32, 64, 128>(bucket, "fused",
                                         [&](auto d) { got = decltype(d)::value; });
    CHECK(got == bucket);
  }
  int calls = 0;
  // The parentheses keep the template arguments' commas out of the macro's.
  CHECK_THROWS_WITH((dispatch::with_head_dim<64, 128>(32, "flash_tc", [&](auto) { ++calls; })),
                    "flash_tc has no kernel for head dimension bucket 32");
  CHECK(calls == 0);
}

TEST_CASE("with_dtype hands over the element type or names the variant", "[cuda][dispatch]") {
  for (const DType dtype : {DType::bf16, DType::fp16}) {
    DType got = DType::fp32;
    dispatch::with_dtype<DType::bf16, DType::fp16>(dtype, "flash_tc",
                                                   [&](auto d) { got = decltype(d)::value; });
    CHECK(got == dtype);
  }
  CHECK_THROWS_WITH(
      (dispatch::with_dtype<DType::bf16, DType::fp16>(DType::fp32, "flash_tc", [](auto) {})),
      "flash_tc does not take fp32 tensors");
}

TEST_CASE("with_flag hands over true_type or false_type", "[cuda][dispatch]") {
  for (const bool flag : {false, true}) {
    int calls = 0;
    bool got = !flag;
    dispatch::with_flag(flag, [&](auto on) {
      static_assert(std::is_same_v<decltype(on), std::true_type> ||
                    std::is_same_v<decltype(on), std::false_type>);
      got = decltype(on)::value;
      ++calls;
    });
    CHECK(got == flag);
    CHECK(calls == 1);
  }
}

}  // namespace
}  // namespace attnbench
