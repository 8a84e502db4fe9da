// The terminal report's number formats: a duration keeps enough digits to compare with the
// settings it is printed beside (a case budget of 1e-09 s beside a prediction of "0.0s" had said
// nothing).
#include "harness/results/terminal_report.h"

#include <catch2/catch.hpp>
#include <vector>

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

PeakCheck check_of(const char* when, double fma, double bf16) {
  PeakCheck check;
  check.when = when;
  check.cpu_fma_gflops = fma;
  check.cpu_fma_sustained_gflops = fma;
  check.cpu_bf16_dot_gflops = bf16;
  return check;
}

TEST_CASE("the table names each dtype's roof, then the final one", "[results]") {
  PeakChecks checks;
  checks.add(check_of("start", 100, 80));  // read low: bf16's roof is the FMA loop for now
  CHECK(roofs_text({"fp32", "bf16"}, checks, false) ==
        "% peak: fp32 against cpu_fma_gflops 100, bf16 against cpu_fma_gflops 100 GFLOP/s (one "
        "roof per dtype: the best check of it so far; rows a later check re-rates are listed at "
        "the end)\n");
  checks.add(check_of("end", 240, 480));
  CHECK(roofs_text({"fp32", "bf16"}, checks, true) ==
        "% peak as every reader of the folder rates it: fp32 against cpu_fma_gflops 240, bf16 "
        "against cpu_bf16_dot_gflops 480 GFLOP/s (one roof per dtype: the best check of it)\n");
  CHECK(roofs_text({}, checks, true).empty());               // no CPU case: nothing to name
  CHECK(roofs_text({"fp32"}, PeakChecks{}, false).empty());  // no check (peaks skipped)
}

TEST_CASE("rows a later check re-rated are listed with both ratings", "[results]") {
  CHECK(rerated_text({}).empty());
  const std::string text = rerated_text({{"flash_cpu", "b1 h8/8 q1024", 97.04, 40.4}});
  CHECK(text ==
        "1 row(s) above were rated against a roof a later check raised; their % peak now:\n"
        "  flash_cpu     b1 h8/8 q1024                           97.0 -> 40.4\n");
  const std::vector<TerminalReport::Rerated> many(23, {"naive", "b1", 50, 10});
  CHECK_THAT(rerated_text(many),
             Catch::Contains("23 row(s)") && Catch::Contains("... and 3 more (summary.csv holds"));
}

}  // namespace
}  // namespace attnbench
