// How a record is rated when read (rate_record): against the best peak check of its folder, and
// flagged as disturbed when the checks disagree by over 10%, one saw other work, or the record is
// above 100% of the peak. Synthetic checks and records; nothing is measured. Also the
// load-average reading behind `run`'s warning at its start.
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

// An fp32 CPU record timed at `gflops`, read against the FMA peak (of its own, when `peak` > 0:
// a record `attnbench append` brought).
CaseRecord record_at(double gflops, double peak = 0) {
  CaseRecord r;
  r.sweep_case.variant = "flash_cpu";
  r.sweep_case.shape = testing::make_shape(1, 8, 8, 1024, 1024, 64, 64, false);
  r.sweep_case.id = case_id(r.sweep_case.variant, r.sweep_case.shape);
  r.work = count_work(r.sweep_case.shape);
  r.timing = summarise({r.work.flops / (gflops * 1e9) * 1e3});
  r.peak_gflops = peak;
  r.peak_name = "cpu_fma_gflops";
  return r;
}

// A decode record, left of the ridge: one query row of 32 heads over 8 KV heads against 32K keys
// of d 128, about one FLOP per byte, timed at `gbps`.
CaseRecord decode_record_at(double gbps) {
  CaseRecord decode;
  decode.sweep_case.variant = "flash_cpu";
  decode.sweep_case.shape = testing::make_shape(1, 32, 8, 1, 32768, 128, 128, false);
  decode.sweep_case.id = case_id(decode.sweep_case.variant, decode.sweep_case.shape);
  decode.work = count_work(decode.sweep_case.shape);
  decode.timing = summarise({decode.work.min_bytes / (gbps * 1e9) * 1e3});
  decode.peak_name = "cpu_fma_gflops";
  return decode;
}

TEST_CASE("the best check is the peak, checks over 10% apart disagree", "[peaks]") {
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
             Catch::Contains("other work ran during the end check") && Catch::Contains("(54%)"));
  CHECK_THAT(checks.doubts("cpu_bf16_dot_gflops"), Catch::Contains("end check"));

  const auto rated = rate_record(to_json(record_at(200)), checks);
  CHECK(rated["disturbed"] == true);
  CHECK_THAT(rated["disturbed_reason"].get<std::string>(), Catch::Contains("during the end check"));
}

TEST_CASE("a check under load for all its trials is busy against the machine's rate", "[peaks]") {
  // A check bounded by time has few trials: under a steady load none runs clean, so its best
  // and its sustained rate agree, both far below what the clean start check found.
  PeakChecks checks;
  checks.add(check("start", 470, 0, 0.97));
  checks.add(check("end", 52, 0, 0.93));
  CHECK_THAT(checks.busy_checks(), Catch::Contains("other work ran during the end check") &&
                                       Catch::Contains("of the best 470"));
  CHECK_THAT(checks.busy_checks(), !Catch::Contains("start check"));
}

TEST_CASE("a stored record holds no rating, read, it is rated against the best check", "[peaks]") {
  const auto stored = to_json(record_at(100));
  for (const char* derived : {"percent_of_peak", "disturbed", "disturbed_reason"})
    CHECK_FALSE(stored.contains(derived));
  CHECK(stored["peak_gflops"].is_null());  // its peak is in the folder's checks
  CHECK(stored["peak_name"] == "cpu_fma_gflops");

  PeakChecks checks;
  checks.add(check("start", 114));
  checks.add(check("end", 235));
  const auto j = rate_record(stored, checks);
  CHECK(j["peak_gflops"] == 235.0);  // read against the best
  CHECK(j["disturbed"] == true);
  CHECK_THAT(j["disturbed_reason"].get<std::string>(), Catch::Contains("checks disagree"));
  CHECK(j["percent_of_peak"].get<double>() == Approx(100.0 * 100 / 235));
  // In the schema's order, every field there.
  std::vector<std::string> names;
  for (const auto& [key, value] : j.items()) names.push_back(key);
  CHECK(names == record_fields());
}

TEST_CASE("a record above 100% of the peak is disturbed, whatever the checks say", "[peaks]") {
  // 176% of a peak read low at the start: the case seen in the field.
  PeakChecks low;
  low.add(check("start", 114));
  auto rated = rate_record(to_json(record_at(200)), low);
  CHECK_THAT(rated["disturbed_reason"].get<std::string>(),
             Catch::Contains("175% of the measured peak 114"));
  CHECK(rated["disturbed"] == true);

  // Rated against agreeing checks whose best it still exceeds: still flagged.
  PeakChecks agreeing;
  agreeing.add(check("start", 150));
  agreeing.add(check("end", 155));
  rated = rate_record(to_json(record_at(200)), agreeing);
  CHECK(rated["peak_gflops"] == 155.0);
  CHECK_THAT(rated["disturbed_reason"].get<std::string>(),
             Catch::StartsWith("129% of the measured peak"));
}

TEST_CASE("an undisturbed record is not flagged, a GPU record reads its own peak's checks",
          "[peaks]") {
  PeakChecks agreeing;
  agreeing.add(check("start", 230));
  agreeing.add(check("end", 234));
  auto rated = rate_record(to_json(record_at(180)), agreeing);
  CHECK(rated["disturbed"] == false);
  CHECK(rated["disturbed_reason"] == "");

  CaseRecord gpu = record_at(180);
  gpu.device = Device::cuda;
  gpu.peak_name = "sgemm_gflops";
  PeakChecks disagreeing;
  PeakCheck start = check("start", 100);
  start.gpu_gflops["sgemm_gflops"] = 50000;
  disagreeing.add(start);
  disagreeing.add(check("end", 200));
  rated = rate_record(to_json(gpu), disagreeing);
  CHECK(rated["peak_gflops"] == 50000.0);
  CHECK(rated["disturbed"] == false);  // the CPU checks say nothing of the GPU

  CaseRecord untimed = record_at(180);
  untimed.timing.reset();
  rated = rate_record(to_json(untimed), agreeing);
  CHECK(rated["disturbed"] == false);
  CHECK(rated["percent_of_peak"].is_null());
}

TEST_CASE("a peer's CPU record reads against the folder's CPU roof, not a peak of its own",
          "[peaks]") {
  CaseRecord peer = record_at(50, 100);
  peer.peak_name = "torch_mm_fp32_gflops";
  PeakChecks checks;
  checks.add(check("start", 300));
  auto rated = rate_record(to_json(peer), checks);
  CHECK(rated["peak_name"] == "cpu_fma_gflops");
  CHECK(rated["peak_gflops"] == 300.0);
  CHECK(rated["percent_of_peak"].get<double>() == Approx(50.0 / 3));
  CHECK(rated["disturbed"] == false);
  // In a folder without CPU checks (one from before append --init took them) it keeps its own.
  rated = rate_record(to_json(peer), PeakChecks{});
  CHECK(rated["peak_name"] == "torch_mm_fp32_gflops");
  CHECK(rated["peak_gflops"] == 100.0);
  CHECK(rated["percent_of_peak"].get<double>() == Approx(50));
}

TEST_CASE("every bf16 record reads against one roof: the highest check of the folder", "[peaks]") {
  // One record written when the start check read vdpbf16ps above the FMA loop, one when it read
  // below: both read against the best of all checks, whatever their writer chose.
  CaseRecord first = record_at(100), second = record_at(100);
  first.sweep_case.shape.dtype = second.sweep_case.shape.dtype = DType::bf16;
  first.peak_name = "cpu_bf16_dot_gflops";
  second.peak_name = "cpu_fma_gflops";
  PeakChecks checks;
  checks.add(check("start", 480, 240));
  checks.add(check("end", 470, 500));
  CHECK(checks.cpu_roof("bf16") == "cpu_bf16_dot_gflops");
  CHECK(checks.cpu_roof("fp32") == "cpu_fma_gflops");
  for (const CaseRecord& record : {first, second}) {
    const auto rated = rate_record(to_json(record), checks);
    CHECK(rated["peak_name"] == "cpu_bf16_dot_gflops");
    CHECK(rated["peak_gflops"] == 500.0);
  }
  // An fp32 record beside them reads against the FMA loop's best.
  const auto fp32 = rate_record(to_json(record_at(100)), checks);
  CHECK(fp32["peak_name"] == "cpu_fma_gflops");
  CHECK(fp32["peak_gflops"] == 480.0);
  // AMX, where a check measured it above both, is bf16's roof.
  PeakCheck amx = check("later", 470, 500);
  amx.cpu_amx_bf16_gflops = 3000;
  checks.add(amx);
  CHECK(rate_record(to_json(first), checks)["peak_name"] == "cpu_amx_bf16_gflops");
}

TEST_CASE("a record written before peak checks keeps its flag, a shard's checks rate only it",
          "[peaks]") {
  auto old = to_json(record_at(100, 120));
  old["percent_of_peak"] = 83.3;
  old["disturbed"] = true;
  old["disturbed_reason"] = "cpu_fma_gflops checks disagree: 60 (start) to 120 (end)";
  auto rated = rate_record(old, PeakChecks{});
  CHECK(rated["disturbed_reason"] == old["disturbed_reason"]);
  CHECK(rated["peak_gflops"] == 120.0);

  PeakChecks merged;
  PeakCheck a = check("start", 200), b = check("start", 400);
  a.shard = "0/2";
  b.shard = "1/2";
  merged.add(a);
  merged.add(b);
  auto of_shard = to_json(record_at(100));
  of_shard["shard"] = "0/2";
  rated = rate_record(of_shard, merged);
  CHECK(rated["peak_gflops"] == 200.0);
  CHECK(rated["disturbed"] == false);  // the other node's check is not compared with this one
  CHECK(rated["shard"] == "0/2");
}

TEST_CASE("a record below the ridge reads % of bandwidth against the best triad check", "[peaks]") {
  // Decode timed at 15 GB/s.
  const auto stored = to_json(decode_record_at(15));
  for (const char* derived : {"peak_gbps", "ridge_intensity", "percent_of_bandwidth"})
    CHECK_FALSE(stored.contains(derived));

  PeakChecks checks;
  PeakCheck start = check("start", 200), end = check("end", 200);
  start.cpu_triad_gbps = 18;
  end.cpu_triad_gbps = 20;  // the best: the start check read low
  checks.add(start);
  checks.add(end);
  CHECK(checks.best_bandwidth("cpu") == 20);
  CHECK(checks.best_bandwidth("cuda") == 0);
  const auto rated = rate_record(stored, checks);
  CHECK(rated["peak_gbps"] == 20.0);
  CHECK(rated["ridge_intensity"].get<double>() == Approx(10.0));
  REQUIRE(stored["arithmetic_intensity"].get<double>() < 10.0);
  CHECK(rated["percent_of_bandwidth"].get<double>() == Approx(75.0));

  // Prefill at n 1024 lies far right of the ridge: the compute roof bounds it, no % of bandwidth.
  const auto prefill = rate_record(to_json(record_at(100)), checks);
  CHECK(prefill["peak_gbps"] == 20.0);
  CHECK(prefill["percent_of_bandwidth"].is_null());
  CHECK(rated["bandwidth_name"] == "cpu_triad_gbps");
  // Without a bandwidth check nothing is derived.
  PeakChecks fma_only;
  fma_only.add(check("start", 200));
  CHECK(rate_record(stored, fma_only)["percent_of_bandwidth"].is_null());
  CHECK(rate_record(stored, fma_only)["peak_gbps"].is_null());
}

TEST_CASE("decode reads % of bandwidth against the better of the read and triad checks",
          "[peaks]") {
  const auto stored = to_json(decode_record_at(15));

  // The read-only sum beats the triad of its own check, and the triad of another check beats it:
  // the roof is the best of all four, by name.
  PeakCheck start = check("start", 200), end = check("end", 200);
  start.cpu_triad_gbps = 18;
  start.cpu_read_gbps = 24;
  end.cpu_triad_gbps = 20;
  end.cpu_read_gbps = 22;
  PeakChecks checks;
  checks.add(start);
  checks.add(end);
  CHECK(checks.bandwidth_roof("cpu").gbps == 24);
  CHECK(checks.bandwidth_roof("cpu").name == "cpu_read_gbps");
  auto rated = rate_record(stored, checks);
  CHECK(rated["peak_gbps"] == 24.0);
  CHECK(rated["bandwidth_name"] == "cpu_read_gbps");
  CHECK(rated["percent_of_bandwidth"].get<double>() == Approx(62.5));
  CHECK(rated["ridge_intensity"].get<double>() == Approx(200.0 / 24));

  // A triad above every read check is the roof then (a host whose stores stream well).
  PeakChecks triad_higher;
  end.cpu_triad_gbps = 30;
  triad_higher.add(start);
  triad_higher.add(end);
  rated = rate_record(stored, triad_higher);
  CHECK(rated["bandwidth_name"] == "cpu_triad_gbps");
  CHECK(rated["percent_of_bandwidth"].get<double>() == Approx(50.0));

  // Both stay in peaks.jsonl, and both in the manifest's summary.
  const PeakCheck back = PeakCheck::from_json(start.to_json());
  CHECK(back.cpu_read_gbps == 24);
  CHECK(back.cpu_triad_gbps == 18);
  nlohmann::ordered_json manifest = {{"peaks", nlohmann::ordered_json::object()}};
  write_peaks_summary(manifest, triad_higher);
  CHECK(manifest["peaks"]["cpu_read_gbps"] == 24.0);
  CHECK(manifest["peaks"]["cpu_triad_gbps"] == 30.0);
}

TEST_CASE("a record left of the ridge is disturbed when its bandwidth checks disagree", "[peaks]") {
  const auto stored = to_json(decode_record_at(30));

  // The memory moved from a slow state to a fast one between the checks; the FMA loop did not.
  PeakCheck start = check("start", 500), end = check("end", 500);
  start.cpu_read_gbps = 49.1;
  start.cpu_triad_gbps = 46.7;
  end.cpu_read_gbps = 72.7;
  end.cpu_triad_gbps = 82.1;
  PeakChecks checks;
  checks.add(start);
  checks.add(end);
  CHECK(checks.disagreement("cpu_fma_gflops").empty());
  CHECK(checks.bandwidth_disagreement("cpu_read_gbps") ==
        "cpu_read_gbps checks disagree: 49.1 (start) to 72.7 (end) GB/s, 48% apart");
  CHECK(checks.bandwidth_disagreement("cpu_fma_gflops").empty());  // not a bandwidth
  const auto rated = rate_record(stored, checks);
  CHECK(rated["bandwidth_name"] == "cpu_triad_gbps");  // the roof: the best of both, by name
  CHECK(rated["percent_of_bandwidth"].get<double>() == Approx(100 * 30 / 82.1));
  CHECK(rated["disturbed"] == true);
  CHECK(rated["disturbed_reason"] ==
        "cpu_triad_gbps checks disagree: 46.7 (start) to 82.1 (end) GB/s, 76% apart");

  // Right of the ridge the compute roof rates a record: the bandwidth checks do not flag it.
  const auto prefill = rate_record(to_json(record_at(100)), checks);
  CHECK(prefill["percent_of_bandwidth"].is_null());
  CHECK(prefill["disturbed"] == false);

  // Checks within 10% of each other do not flag it either.
  PeakChecks steady;
  end.cpu_read_gbps = 52;
  end.cpu_triad_gbps = 50;
  steady.add(start);
  steady.add(end);
  CHECK(rate_record(stored, steady)["disturbed"] == false);
}

TEST_CASE("peak checks are lines that come back, the manifest keeps a summary", "[peaks]") {
  PeakChecks checks;
  PeakCheck start = check("start", 114, 400);
  start.load_1min = 1.5;
  start.cpu_triad_gbps = 21.5;
  checks.add(start);
  checks.add(check("end", 235));
  nlohmann::ordered_json manifest = {{"peaks", {{"cpu_fma_gflops", 114.0}}}};
  write_peaks_summary(manifest, checks);
  CHECK_FALSE(manifest.contains("peak_checks"));
  CHECK(manifest["peaks"]["cpu_fma_gflops"] == 235.0);
  CHECK(manifest["peaks"]["cpu_bf16_dot_gflops"] == 400.0);
  CHECK_THAT(manifest["peaks"]["disturbed_reason"].get<std::string>(),
             Catch::Contains("cpu_fma_gflops checks disagree"));
  PeakChecks back;
  for (const PeakCheck& c : checks.checks()) {
    const auto line = nlohmann::ordered_json::parse(c.to_json().dump());
    CHECK(line["when"] == c.when);
    back.add(PeakCheck::from_json(line));
  }
  REQUIRE(back.checks().size() == 2);
  CHECK(back.checks()[0].load_1min == 1.5);
  CHECK(back.checks()[0].cpu_triad_gbps == 21.5);
  CHECK(back.checks()[1].cpu_triad_gbps == 0);  // null in JSON
  CHECK(manifest["peaks"]["cpu_triad_gbps"] == 21.5);
  CHECK_FALSE(back.checks()[1].load_1min.has_value());
  CHECK(back.checks()[1].cpu_bf16_dot_gflops == 0);  // null in JSON
  CHECK(back.checks()[1].cpu_fma_sustained_gflops == Approx(0.98 * 235));
  CHECK(PeakChecks::from_json(nullptr).checks().empty());
  // Folders written before peaks.jsonl kept the list in the manifest.
  CHECK(PeakChecks::from_json(checks.to_json()).best("cpu_fma_gflops") == 235);
  CHECK_THROWS(PeakCheck::from_json(nlohmann::ordered_json::array()));
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
  // With no peak checks, nothing is re-checked at the end: it says so instead.
  CHECK_THAT(load_warning(*load, 2, false),
             !Catch::Contains("re-checked") && Catch::Contains("nothing checks the machine"));
}

}  // namespace
}  // namespace attnbench

namespace attnbench {
namespace {

TEST_CASE("a timed record no check rates says why, a rated one says nothing", "[peaks]") {
  const nlohmann::ordered_json stored = to_json(record_at(100));
  const auto unrated = rate_record(stored, PeakChecks{});  // measure.peaks = skip: no checks
  CHECK(unrated["percent_of_peak"].is_null());
  CHECK(unrated["disturbed"] == false);
  CHECK_THAT(unrated["unrated_reason"].get<std::string>(),
             Catch::Contains("measure.peaks = skip") && Catch::Contains("cpu_fma_gflops"));
  PeakChecks gpu_only;
  PeakCheck gpu = check("start", 0);
  gpu.gpu_gflops["sgemm_gflops"] = 50000;
  gpu_only.add(gpu);
  CHECK(rate_record(stored, gpu_only)["unrated_reason"] == "no peak check measured cpu_fma_gflops");
  PeakChecks cpu;
  cpu.add(check("start", 200));
  CHECK(rate_record(stored, cpu)["unrated_reason"] == "");
}

}  // namespace
}  // namespace attnbench
