// When a record is flagged as disturbed: peak checks that disagree by over 10%, or a record above
// 100% of the peak. Synthetic checks and records; nothing is measured. Also the load-average
// reading behind `run`'s warning at its start.
#include "harness/results/peak_checks.h"

#include <catch2/catch.hpp>

#include "harness/core/record.h"
#include "harness/measure/load_average.h"
#include "harness/measure/timing.h"
#include "tests/edge_shapes.h"

namespace attnbench {
namespace {

// A check whose FMA loop sustained `sustained` of its best (1: nothing else ran).
PeakCheck check(const std::string& when, double fma, double bf16 = 0, double sustained = 0.98) {
  PeakCheck c;
  c.when = when;
  c.cpu_fma_gflops = fma;
  c.cpu_fma_sustained_gflops = sustained * fma;
  c.cpu_bf16_dot_gflops = bf16;
  return c;
}

// An fp32 CPU record timed at `gflops`, read against the FMA peak `peak`.
CaseRecord record_at(double gflops, double peak) {
  CaseRecord r;
  r.the_case.variant = "flash_cpu";
  r.the_case.shape = testing::make_shape(1, 8, 8, 1024, 1024, 64, 64, false);
  r.the_case.id = case_id(r.the_case.variant, r.the_case.shape);
  r.work = count_work(r.the_case.shape);
  r.timing = summarise({r.work.flops / (gflops * 1e9) * 1e3});
  r.peak_gflops = peak;
  r.peak_name = "cpu_fma_gflops";
  return r;
}

TEST_CASE("the best check is the peak; checks over 10% apart disagree", "[peaks]") {
  PeakChecks checks;
  checks.add(check("start", 114, 400));
  checks.add(check("end", 235, 410));
  CHECK(checks.best("cpu_fma_gflops") == 235);
  CHECK(checks.best("cpu_bf16_dot_gflops") == 410);
  CHECK(checks.best("sgemm_gflops") == 0);  // not a re-checked peak
  CHECK_THAT(checks.disagreement("cpu_fma_gflops"),
             Catch::Contains("114 (start) to 235 (end)") && Catch::Contains("106% apart"));
  CHECK(checks.disagreement("cpu_bf16_dot_gflops").empty());  // 2.5% apart

  PeakChecks close;
  close.add(check("start", 200));
  close.add(check("between variants", 219.9));  // 9.95% apart: within the limit
  close.add(check("end", 205));
  CHECK(close.disagreement("cpu_fma_gflops").empty());
  close.add(check("end", 181));  // 219.9 / 181 - 1 = 21%
  CHECK_THAT(close.disagreement("cpu_fma_gflops"), Catch::Contains("181 (end) to 219.9"));

  PeakChecks one;
  one.add(check("start", 100));
  CHECK(one.disagreement("cpu_fma_gflops").empty());
  CHECK(one.disagreement("cpu_bf16_dot_gflops").empty());  // never measured: nothing to compare
}

TEST_CASE("a check whose loop sustained far less than its best saw other work", "[peaks]") {
  PeakChecks checks;
  checks.add(check("start", 380, 0, 0.97));
  CHECK(checks.busy_checks().empty());
  CHECK(checks.doubts("cpu_fma_gflops").empty());
  // A busy loop on one of two cores: the best short trial still finds a clean millisecond, but
  // over all trials the loop got about half the machine.
  checks.add(check("end", 376, 0, 0.55));
  CHECK(checks.disagreement("cpu_fma_gflops").empty());  // the best trials agree...
  CHECK_THAT(checks.busy_checks(),                       // ...the sustained rate does not
             Catch::Contains("other work ran during the end check") && Catch::Contains("(55%)"));
  CHECK_THAT(checks.doubts("cpu_bf16_dot_gflops"), Catch::Contains("end check"));

  CaseRecord r = record_at(200, 380);
  rate_against_peaks(r, checks);
  CHECK(to_json(r)["disturbed"] == true);
  CHECK_THAT(to_json(r)["disturbed_reason"].get<std::string>(),
             Catch::Contains("during the end check"));
}

TEST_CASE("a record is disturbed when its peak checks disagree", "[peaks]") {
  PeakChecks checks;
  checks.add(check("start", 114));
  checks.add(check("end", 235));
  CaseRecord r = record_at(100, 114);
  rate_against_peaks(r, checks);
  CHECK(r.peak_gflops == 235);  // read against the best
  const auto j = to_json(r);
  CHECK(j["disturbed"] == true);
  CHECK_THAT(j["disturbed_reason"].get<std::string>(), Catch::Contains("checks disagree"));
  CHECK(j["percent_of_peak"].get<double>() == Approx(100.0 * 100 / 235));
}

TEST_CASE("a record above 100% of the peak is disturbed, whatever the checks say", "[peaks]") {
  // 176% of a peak read low at the start: the case seen in the field.
  CaseRecord r = record_at(200, 114);
  CHECK_THAT(disturbed_reason(r), Catch::Contains("175% of the measured peak 114"));
  CHECK(to_json(r)["disturbed"] == true);

  // Rated against agreeing checks whose best it still exceeds: still flagged.
  PeakChecks agreeing;
  agreeing.add(check("start", 150));
  agreeing.add(check("end", 155));
  rate_against_peaks(r, agreeing);
  CHECK(r.peak_gflops == 155);
  CHECK_THAT(disturbed_reason(r), Catch::StartsWith("129% of the measured peak"));
}

TEST_CASE("an undisturbed record is not flagged; a GPU record keeps its own peak", "[peaks]") {
  PeakChecks agreeing;
  agreeing.add(check("start", 230));
  agreeing.add(check("end", 234));
  CaseRecord r = record_at(180, 230);
  rate_against_peaks(r, agreeing);
  CHECK(disturbed_reason(r).empty());
  CHECK(to_json(r)["disturbed"] == false);
  CHECK(to_json(r)["disturbed_reason"] == "");

  CaseRecord gpu = record_at(180, 50000);
  gpu.device = Device::cuda;
  gpu.peak_name = "sgemm_gflops";
  PeakChecks disagreeing;
  disagreeing.add(check("start", 100));
  disagreeing.add(check("end", 200));
  rate_against_peaks(gpu, disagreeing);
  CHECK(gpu.peak_gflops == 50000);
  CHECK(disturbed_reason(gpu).empty());

  CaseRecord untimed = record_at(180, 230);
  untimed.timing.reset();
  CHECK(disturbed_reason(untimed).empty());
}

TEST_CASE("peak checks go into the manifest and come back", "[peaks]") {
  PeakChecks checks;
  PeakCheck start = check("start", 114, 400);
  start.load_1min = 1.5;
  checks.add(start);
  checks.add(check("end", 235));
  nlohmann::ordered_json manifest = {{"peaks", {{"cpu_fma_gflops", 114.0}}}};
  write_peak_checks(manifest, checks);
  CHECK(manifest["peaks"]["cpu_fma_gflops"] == 235.0);
  CHECK(manifest["peaks"]["cpu_bf16_dot_gflops"] == 400.0);
  CHECK_THAT(manifest["peaks"]["disturbed_reason"].get<std::string>(),
             Catch::Contains("cpu_fma_gflops checks disagree"));
  const PeakChecks back = PeakChecks::from_json(manifest["peak_checks"]);
  REQUIRE(back.checks().size() == 2);
  CHECK(back.checks()[0].load_1min == 1.5);
  CHECK_FALSE(back.checks()[1].load_1min.has_value());
  CHECK(back.checks()[1].cpu_bf16_dot_gflops == 0);  // null in JSON
  CHECK(back.checks()[1].cpu_fma_sustained_gflops == Approx(0.98 * 235));
  CHECK(PeakChecks::from_json(nullptr).checks().empty());
}

TEST_CASE("the load average: parsed from /proc/loadavg text, a warning when busy", "[peaks]") {
  const auto load = parse_load_average("2.50 1.20 0.30 3/456 7890\n");
  REQUIRE(load);
  CHECK(load->one_minute == 2.5);
  CHECK(load->fifteen_minutes == 0.3);
  CHECK_FALSE(parse_load_average("not a load average"));
  CHECK_FALSE(parse_load_average(""));

  CHECK_THAT(load_warning(*load, 2), Catch::Contains("load average 2.50 (1 min) on 2 CPUs"));
  CHECK(load_warning(*parse_load_average("0.10 0.50 0.90 1/100 1"), 2).empty());
}

}  // namespace
}  // namespace attnbench
