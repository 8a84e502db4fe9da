#include "harness/results/peak_checks.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <stdexcept>
#include <vector>

#include "harness/core/record.h"
#include "harness/measure/cpu_peak.h"
#include "harness/measure/load_average.h"
#include "harness/results/cpu_peak_check.h"

namespace attnbench {

namespace {

constexpr const char* fma_name = "cpu_fma_gflops";
constexpr const char* bf16_name = "cpu_bf16_dot_gflops";
constexpr const char* amx_name = "cpu_amx_bf16_gflops";
constexpr const char* triad_name = "cpu_triad_gbps";
constexpr const char* read_name = "cpu_read_gbps";
constexpr const char* copy_name = "gpu_copy_gbps";

// The value of one peak in a check; 0 when that check has none.
double value_of(const PeakCheck& check, const std::string& peak_name) {
  if (peak_name == fma_name) return check.cpu_fma_gflops;
  if (peak_name == bf16_name) return check.cpu_bf16_dot_gflops;
  if (peak_name == amx_name) return check.cpu_amx_bf16_gflops;
  const auto found = check.gpu_gflops.find(peak_name);
  return found == check.gpu_gflops.end() ? 0 : found->second;
}

double number(const nlohmann::ordered_json& object, const char* key) {
  const auto found = object.find(key);
  return found != object.end() && found->is_number() ? found->get<double>() : 0.0;
}

nlohmann::ordered_json positive_or_null(double value) {
  return value > 0 ? nlohmann::ordered_json(value) : nlohmann::ordered_json(nullptr);
}

constexpr const char* gpu_peak_names[] = {"sgemm_gflops", "tf32_gemm_gflops", "bf16_gemm_gflops",
                                          "fp16_gemm_gflops"};

// A check is busy when its FMA loop sustained well under the machine's rate: the best trial of
// any check (its own best alone misses a load that lasted the whole check: a check bounded by
// time has few trials, and under a steady load every one of them was interrupted).
bool is_busy(const PeakCheck& check, double machine) {
  return check.cpu_fma_gflops > 0 && check.cpu_fma_sustained_gflops > 0 &&
         check.cpu_fma_sustained_gflops < (1 - peak_disagreement_limit) * machine;
}

// The bandwidth checks, by their peaks.jsonl names.
constexpr std::pair<const char*, double PeakCheck::*> bandwidths[] = {
    {read_name, &PeakCheck::cpu_read_gbps},
    {triad_name, &PeakCheck::cpu_triad_gbps},
    {copy_name, &PeakCheck::gpu_copy_gbps}};

// "<name> checks disagree: <lowest> (<when>) to <highest> (<when>) <unit>, N% apart" over the
// checks' positive `value_of_check`, or empty when those are within peak_disagreement_limit (or
// fewer than two checks have one).
template <class ValueOf>
std::string checks_disagreement(const std::vector<PeakCheck>& checks, const std::string& name,
                                const char* unit, ValueOf value_of_check) {
  const PeakCheck* lowest = nullptr;
  const PeakCheck* highest = nullptr;
  for (const PeakCheck& check : checks) {
    const double value = value_of_check(check);
    if (value <= 0) continue;
    if (!lowest || value < value_of_check(*lowest)) lowest = &check;
    if (!highest || value > value_of_check(*highest)) highest = &check;
  }
  if (!lowest || lowest == highest) return {};
  const double low = value_of_check(*lowest), high = value_of_check(*highest);
  if (high / low - 1 <= peak_disagreement_limit) return {};
  return fmt::format("{} checks disagree: {:.4g} ({}) to {:.4g} ({}) {}, {:.0f}% apart", name, low,
                     lowest->when, high, highest->when, unit, 100 * (high / low - 1));
}

}  // namespace

nlohmann::ordered_json PeakCheck::to_json() const {
  nlohmann::ordered_json line = {{"when", when},
                                 {"date", date},
                                 {fma_name, cpu_fma_gflops},
                                 {"cpu_fma_sustained_gflops", cpu_fma_sustained_gflops},
                                 {bf16_name, positive_or_null(cpu_bf16_dot_gflops)},
                                 {"load_1min", load_1min ? nlohmann::ordered_json(*load_1min)
                                                         : nlohmann::ordered_json(nullptr)}};
  for (const auto& [name, gflops] : gpu_gflops) line[name] = positive_or_null(gflops);
  line[triad_name] = positive_or_null(cpu_triad_gbps);
  if (cpu_read_gbps > 0) line[read_name] = cpu_read_gbps;
  if (cpu_amx_bf16_gflops > 0) line[amx_name] = cpu_amx_bf16_gflops;
  if (gpu_copy_gbps > 0) line[copy_name] = gpu_copy_gbps;
  if (!shard.empty()) line["shard"] = shard;
  if (!sizing.is_null()) line["sizing"] = sizing;
  return line;
}

std::string PeakCheck::problem(const nlohmann::ordered_json& line) {
  // Every rate a reader rates records against, and the load: null, or a number from 0 to a
  // bound past any machine (a string read as 0 left every record unrated without a word; 1e300
  // rated them at 1e-296% of it).
  constexpr double kMostRate = 1e9;  // GFLOP/s or GB/s
  std::vector<const char*> rates = {
      fma_name, "cpu_fma_sustained_gflops", bf16_name, amx_name, triad_name, read_name, copy_name};
  rates.insert(rates.end(), std::begin(gpu_peak_names), std::end(gpu_peak_names));
  for (const char* name : rates) {
    const auto found = line.find(name);
    if (found == line.end() || found->is_null()) continue;
    if (!found->is_number() || !(found->get<double>() >= 0) || found->get<double>() > kMostRate) {
      const std::string shown =
          found->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      return fmt::format("'{}' is {}: a rate from 0 to {:g}", name,
                         shown.size() <= 40 ? shown : shown.substr(0, 37) + "...", kMostRate);
    }
  }
  if (const auto load = line.find("load_1min"); load != line.end() && !load->is_null()) {
    if (!load->is_number() || !(load->get<double>() >= 0))
      return fmt::format(
          "'load_1min' is {}: a load of 0 or more",
          load->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).substr(0, 40));
  }
  return {};
}

PeakCheck PeakCheck::from_json(const nlohmann::ordered_json& line) {
  if (!line.is_object()) throw std::runtime_error("a peak check must be a JSON object");
  PeakCheck check;
  check.when = line.contains("when") && line["when"].is_string() ? line["when"].get<std::string>()
                                                                 : std::string();
  check.date = line.contains("date") && line["date"].is_string() ? line["date"].get<std::string>()
                                                                 : std::string();
  check.cpu_fma_gflops = number(line, fma_name);
  check.cpu_fma_sustained_gflops = number(line, "cpu_fma_sustained_gflops");
  check.cpu_bf16_dot_gflops = number(line, bf16_name);
  check.cpu_amx_bf16_gflops = number(line, amx_name);
  if (line.contains("load_1min") && line["load_1min"].is_number())
    check.load_1min = line["load_1min"].get<double>();
  for (const char* name : gpu_peak_names)
    if (number(line, name) > 0) check.gpu_gflops[name] = number(line, name);
  check.cpu_triad_gbps = number(line, triad_name);
  check.cpu_read_gbps = number(line, read_name);
  check.gpu_copy_gbps = number(line, copy_name);
  if (line.contains("shard") && line["shard"].is_string())
    check.shard = line["shard"].get<std::string>();
  if (line.contains("sizing") && line["sizing"].is_object()) check.sizing = line["sizing"];
  return check;
}

double PeakChecks::best(const std::string& peak_name) const {
  double best = 0;
  for (const PeakCheck& check : checks_) best = std::max(best, value_of(check, peak_name));
  return best;
}

PeakChecks::BandwidthRoof PeakChecks::bandwidth_roof(const std::string& device) const {
  BandwidthRoof roof;
  const auto consider = [&roof](double gbps, const char* name) {
    if (gbps > roof.gbps) roof = {gbps, name};
  };
  for (const PeakCheck& check : checks_) {
    if (device == "cpu") {
      consider(check.cpu_read_gbps, read_name);
      consider(check.cpu_triad_gbps, triad_name);
    } else if (device == "cuda") {
      consider(check.gpu_copy_gbps, copy_name);
    }
  }
  return roof;
}

std::string PeakChecks::cpu_roof(const std::string& dtype) const {
  std::string roof = fma_name;
  if (dtype != "bf16") return roof;
  for (const char* name : {bf16_name, amx_name})
    if (best(name) > best(roof)) roof = name;
  return roof;
}

std::string PeakChecks::disagreement(const std::string& peak_name) const {
  return checks_disagreement(checks_, peak_name, "GFLOP/s",
                             [&](const PeakCheck& check) { return value_of(check, peak_name); });
}

std::string PeakChecks::bandwidth_disagreement(const std::string& bandwidth_name) const {
  for (const auto& bandwidth : bandwidths) {
    if (bandwidth_name != bandwidth.first) continue;
    double PeakCheck::*const gbps_of = bandwidth.second;
    return checks_disagreement(checks_, bandwidth_name, "GB/s",
                               [&](const PeakCheck& check) { return check.*gbps_of; });
  }
  return {};
}

std::string PeakChecks::busy_checks() const {
  const double machine = best(fma_name);
  std::string text;
  for (const PeakCheck& check : checks_) {
    if (!is_busy(check, machine)) continue;
    text += fmt::format(
        "{}other work ran during the {} check: the FMA loop sustained {:.4g} of the best {:.4g} "
        "GFLOP/s ({:.0f}%)",
        text.empty() ? "" : "; ", check.when, check.cpu_fma_sustained_gflops, machine,
        100 * check.cpu_fma_sustained_gflops / machine);
  }
  return text;
}

int PeakChecks::busy_check_count() const {
  const double machine = best(fma_name);
  return static_cast<int>(
      std::count_if(checks_.begin(), checks_.end(),
                    [machine](const PeakCheck& check) { return is_busy(check, machine); }));
}

std::string PeakChecks::worst_check() const {
  const double machine = best(fma_name);
  const auto rate = [](const PeakCheck& check) {
    return check.cpu_fma_sustained_gflops > 0 ? check.cpu_fma_sustained_gflops
                                              : check.cpu_fma_gflops;
  };
  const PeakCheck* worst = nullptr;
  for (const PeakCheck& check : checks_)
    if (rate(check) > 0 && (!worst || rate(check) < rate(*worst))) worst = &check;
  if (machine <= 0 || !worst) return {};
  return fmt::format(
      "worst check: the {} check's FMA loop sustained {:.3g} of the best {:.3g} GFLOP/s ({:.0f}%)",
      worst->when, rate(*worst), machine, 100 * rate(*worst) / machine);
}

std::string PeakChecks::doubts(const std::string& peak_name) const {
  const std::string disagree = disagreement(peak_name);
  const std::string busy = busy_checks();
  return disagree.empty() || busy.empty() ? disagree + busy : disagree + "; " + busy;
}

PeakChecks PeakChecks::for_shard(const std::string& shard) const {
  PeakChecks chosen;
  for (const PeakCheck& check : checks_)
    if (check.shard.empty() || check.shard == shard) chosen.add(check);
  return chosen;
}

nlohmann::ordered_json PeakChecks::summary_json() const {
  nlohmann::ordered_json best_of = nlohmann::ordered_json::object();
  std::vector<std::string> names = {fma_name, bf16_name, amx_name};
  names.insert(names.end(), std::begin(gpu_peak_names), std::end(gpu_peak_names));
  for (const std::string& name : names)
    if (best(name) > 0) best_of[name] = best(name);
  for (const auto& [name, gbps_of] : bandwidths) {
    double gbps = 0;
    for (const PeakCheck& check : checks_) gbps = std::max(gbps, check.*gbps_of);
    if (gbps > 0) best_of[name] = gbps;
  }
  // Busy checks per shard: a merged run's shards ran on machines of their own.
  std::vector<std::string> shards;
  for (const PeakCheck& check : checks_)
    if (std::find(shards.begin(), shards.end(), check.shard) == shards.end())
      shards.push_back(check.shard);
  std::string busy;
  int busy_count = 0;
  for (const std::string& shard : shards) {
    PeakChecks own;
    for (const PeakCheck& check : checks_)
      if (check.shard == shard) own.add(check);
    const std::string text = own.busy_checks();
    if (!text.empty()) busy += (busy.empty() ? "" : "; ") + text;
    busy_count += own.busy_check_count();
  }
  return {{"disagreement_limit", peak_disagreement_limit},
          {"best", best_of},
          {"busy_checks", busy},
          {"busy_check_count", busy_count},
          {"worst_check", worst_check()}};
}

nlohmann::ordered_json PeakChecks::to_json() const {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const PeakCheck& check : checks_) list.push_back(check.to_json());
  return list;
}

PeakChecks PeakChecks::from_json(const nlohmann::ordered_json& list) {
  PeakChecks checks;
  if (!list.is_array()) return checks;
  for (const auto& entry : list)
    if (entry.is_object()) checks.add(PeakCheck::from_json(entry));
  return checks;
}

namespace {

nlohmann::ordered_json loop_json(const LoopSizing& sizing) {
  return {{"trials", sizing.trials},
          {"budget_ms", sizing.budget_ms},
          {"elapsed_ms", sizing.elapsed_ms}};
}

}  // namespace

nlohmann::ordered_json peak_sizing_json(const CpuPeaks& peaks) {
  nlohmann::ordered_json sizing = nlohmann::ordered_json::object();
  if (peaks.fma_one_thread.trials > 0) sizing["fma_one_thread"] = loop_json(peaks.fma_one_thread);
  if (peaks.fma_all_threads.trials > 0)
    sizing["fma_all_threads"] = loop_json(peaks.fma_all_threads);
  if (peaks.bf16_dot.trials > 0) sizing["bf16_dot"] = loop_json(peaks.bf16_dot);
  if (peaks.amx_bf16.trials > 0) sizing["amx_bf16"] = loop_json(peaks.amx_bf16);
  if (peaks.sgemm.trials > 0) {
    sizing["sgemm"] = loop_json(peaks.sgemm);
    sizing["sgemm"]["n"] = peaks.sgemm_n;
  }
  nlohmann::ordered_json triad = {{"measured", peaks.triad.array_bytes > 0}};
  std::string reason = peaks.bandwidth.reason;
  if (reason.empty())
    reason = peaks.bandwidth.measure ? "measured: the run's start check found a case left of the "
                                       "ridge"
                                     : "not measured: no case of the run is left of the ridge";
  triad["reason"] = reason;
  if (peaks.bandwidth.ridge_estimate > 0) triad["ridge_estimate"] = peaks.bandwidth.ridge_estimate;
  if (peaks.bandwidth.measure) {
    triad["array_bytes"] = peaks.triad.array_bytes;
    triad["trials"] = peaks.triad.trials;
    triad["budget_ms"] = peaks.triad.budget_ms;
    triad["elapsed_ms"] = peaks.triad.elapsed_ms;
    triad["sizing"] = peaks.triad.sizing;
    triad["evicted_before_each_trial_by"] =
        peaks.triad.eviction.empty() ? "nothing" : peaks.triad.eviction;
    if (peaks.triad.read_trials > 0) {
      triad["read_trials"] = peaks.triad.read_trials;
      triad["read_budget_ms"] = peaks.triad.read_budget_ms;
    }
  }
  sizing["triad"] = triad;
  return sizing;
}

PeakCheck measure_peak_check(const std::string& when, bool with_bandwidth) {
  const std::string date =
      fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::chrono::system_clock::now()));
  // Read before measuring: the measurement itself keeps every core busy for a moment.
  const std::optional<LoadAverage> load = read_load_average();
  const CpuPeaks peaks = measure_cpu_peak_check(with_bandwidth);
  return cpu_peak_check(when, date, peaks, load, peak_sizing_json(peaks));
}

namespace {

std::string string_field(const nlohmann::ordered_json& record, const char* key) {
  const auto found = record.find(key);
  return found != record.end() && found->is_string() ? found->get<std::string>() : std::string();
}

bool is_derived(const std::string& name) {
  for (const RecordField& field : record_schema())
    if (field.derived && name == field.name) return true;
  return false;
}

}  // namespace

namespace {

// A CPU record reads against its dtype's roof as the folder's checks stand now, not the one its
// writer chose from the checks it had then; a record measured elsewhere (the PyTorch peer,
// appended to a folder whose --init took the harness's checks) by the same rule. Records without
// CPU checks (GPU records, peers' folders from before) keep the name they stored.
std::string peak_name_of(const nlohmann::ordered_json& stored, const PeakChecks& checks) {
  if (string_field(stored, "device") == "cpu" && checks.best(fma_name) > 0)
    return checks.cpu_roof(string_field(stored, "dtype"));
  return string_field(stored, "peak_name");
}

// Written before peaks.jsonl, in a folder that kept no checks: the rating as it was written.
std::string stored_disturbance(const nlohmann::ordered_json& stored,
                               const nlohmann::ordered_json& percent) {
  if (stored.contains("disturbed")) {
    if (stored["disturbed"] == true) {
      const std::string reason = string_field(stored, "disturbed_reason");
      return reason.empty() ? "flagged disturbed" : reason;
    }
    return {};
  }
  if (percent.is_number() && percent.get<double>() > 100)
    return fmt::format("{:.0f}% of the measured peak: the peak read low", percent.get<double>());
  return {};
}

// Nothing runs faster than the machine's peak: above it, the peak was measured while other work
// ran, so this record's "% of peak" (and the peak) cannot be trusted.
std::string with_above_peak(std::string reason, double gflops, double peak) {
  if (peak > 0 && gflops > peak) {
    reason += fmt::format("{}{:.0f}% of the measured peak {:.4g} GFLOP/s: the peak read low",
                          reason.empty() ? "" : "; ", 100 * gflops / peak, peak);
  }
  return reason;
}

// A timed record without a rating says why: no check measured its peak (a run with
// measure.peaks = skip takes none), rather than reading as 0% or as a lost value.
std::string unrated_reason_of(const PeakChecks& checks, const std::string& peak_name) {
  if (checks.empty()) {
    return fmt::format(
        "no peak check in this folder (a run with measure.peaks = skip takes none): {} unknown",
        peak_name);
  }
  return fmt::format("no peak check measured {}", peak_name);
}

// The share of the bandwidth roof a record left of the ridge moved; null right of it, or
// without a roof or the record's traffic.
nlohmann::ordered_json percent_of_bandwidth_of(const nlohmann::ordered_json& stored,
                                               double bandwidth, double ridge) {
  const double intensity = number(stored, "arithmetic_intensity"),
               moved = number(stored, "bytes_moved"), median_ms = number(stored, "time_ms_median");
  if (bandwidth > 0 && intensity > 0 && (ridge == 0 || intensity < ridge) && moved > 0 &&
      median_ms > 0)
    return 100 * moved / (median_ms * 1e6) / bandwidth;
  return nullptr;
}

// The fields rate_record derives from the checks, by name; the schema decides where each stands.
nlohmann::ordered_json derived_fields(const nlohmann::ordered_json& stored,
                                      const PeakChecks& checks) {
  const std::string peak_name = peak_name_of(stored, checks);
  const double best = checks.best(peak_name);
  const double peak = best > 0 ? best : number(stored, "peak_gflops");
  const auto gflops_field = stored.find("gflops");
  const bool timed = gflops_field != stored.end() && gflops_field->is_number();
  const double gflops = timed ? gflops_field->get<double>() : 0;

  std::string reason;
  nlohmann::ordered_json percent = timed && peak > 0 ? nlohmann::ordered_json(100 * gflops / peak)
                                                     : nlohmann::ordered_json(nullptr);
  if (checks.empty() && stored.contains("percent_of_peak")) {
    percent = stored["percent_of_peak"];
    reason = stored_disturbance(stored, percent);
  } else {
    if (best > 0 && string_field(stored, "device") == "cpu") reason = checks.doubts(peak_name);
    reason = with_above_peak(reason, gflops, peak);
  }
  const std::string unrated_reason =
      timed && percent.is_null() ? unrated_reason_of(checks, peak_name) : std::string();

  const PeakChecks::BandwidthRoof roof = checks.bandwidth_roof(string_field(stored, "device"));
  const double ridge = roof.gbps > 0 && peak > 0 ? peak / roof.gbps : 0;
  const nlohmann::ordered_json percent_of_bandwidth =
      percent_of_bandwidth_of(stored, roof.gbps, ridge);
  // Left of the ridge the bandwidth roof is the rating: its checks' disagreement is a doubt too.
  if (percent_of_bandwidth.is_number()) {
    const std::string apart = checks.bandwidth_disagreement(roof.name);
    if (!apart.empty()) reason += (reason.empty() ? "" : "; ") + apart;
  }
  return {{"peak_gbps", positive_or_null(roof.gbps)},
          {"bandwidth_name", roof.name},
          {"ridge_intensity", positive_or_null(ridge)},
          {"percent_of_bandwidth", percent_of_bandwidth},
          {"peak_gflops", positive_or_null(peak)},
          {"peak_name", peak_name},
          {"percent_of_peak", percent},
          {"disturbed", !reason.empty()},
          {"disturbed_reason", reason},
          {"unrated_reason", unrated_reason}};
}

}  // namespace

nlohmann::ordered_json rate_record(const nlohmann::ordered_json& stored, const PeakChecks& all) {
  const nlohmann::ordered_json derived =
      derived_fields(stored, all.for_shard(string_field(stored, "shard")));
  nlohmann::ordered_json rated = nlohmann::ordered_json::object();
  for (const RecordField& field : record_schema()) {
    const std::string name = field.name;
    if (const auto found = derived.find(name); found != derived.end()) {
      rated[name] = *found;
    } else if (const auto kept = stored.find(name); kept != stored.end()) {
      rated[name] = *kept;
    }
  }
  // What merge adds (node, machine, shard), and fields of other versions, as they are.
  for (const auto& [key, value] : stored.items())
    if (!rated.contains(key) && !is_derived(key)) rated[key] = value;
  return rated;
}

void write_peaks_summary(nlohmann::ordered_json& manifest, const PeakChecks& checks) {
  if (!manifest.contains("peaks") || !manifest["peaks"].is_object()) return;
  auto& peaks = manifest["peaks"];
  for (const char* name : {fma_name, bf16_name, amx_name}) {
    if (checks.best(name) > 0) peaks[name] = checks.best(name);
  }
  double triad = 0, read = 0;
  for (const PeakCheck& check : checks.checks()) {
    triad = std::max(triad, check.cpu_triad_gbps);
    read = std::max(read, check.cpu_read_gbps);
  }
  if (triad > 0) peaks[triad_name] = triad;
  if (read > 0) peaks[read_name] = read;
  // What flags the run's fp32 records (bf16 records add their own peak's disagreement).
  peaks["disturbed_reason"] = checks.doubts(fma_name);
}

}  // namespace attnbench
