// The terminal report's number formats: a duration keeps enough digits to compare with the
// settings it is printed beside (a case budget of 1e-09 s beside a prediction of "0.0s" had said
// nothing).
#include "harness/results/terminal_report.h"

#include <catch2/catch.hpp>

namespace attnbench {
namespace {

TEST_CASE("durations keep their digits from microseconds to hours", "[results]") {
  CHECK(format_duration(0) == "0.0s");
  CHECK(format_duration(2.5e-8) == "0.025us");
  CHECK(format_duration(4.56e-4) == "456us");
  CHECK(format_duration(0.0123) == "12.3ms");
  CHECK(format_duration(0.25) == "0.2s");
  CHECK(format_duration(12.34) == "12.3s");
  CHECK(format_duration(185) == "3m05s");
  CHECK(format_duration(3720) == "1h02m");
}

}  // namespace
}  // namespace attnbench
