// The peaks a run measures at its start, between variants and at its end (and at the start of
// every resumed session): each check a line of its own in the run folder's peaks.jsonl, appended
// and fsync'ed as it is taken. A peak measured once, while something else ran, rescales every
// "% of peak" of the run without a word (records at 176% were seen); measured again, a disturbed
// check shows as a disagreement.
//
// Records are facts, written once: a record names the peak it is rated against (peak_name) and
// never stores the rating. rate_record() derives peak_gflops, percent_of_peak, disturbed and
// disturbed_reason when the folder is read, against the best check of the whole folder (every
// session of it); every C++ reader goes through it, and `attnbench export` prints its ratings for
// every other reader (the Python package reads that export and rates nothing itself).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace attnbench {

struct CpuPeaks;

struct PeakCheck {
  std::string when;           // "start", "resume", "between variants", "end"
  std::string date;           // UTC, ISO 8601
  double cpu_fma_gflops = 0;  // the best short trial: what the machine can do
  // The FMA loop's rate over all its trials: below the best, something else ran during the check.
  double cpu_fma_sustained_gflops = 0;
  double cpu_bf16_dot_gflops = 0;   // 0 without AVX512_BF16
  double cpu_amx_bf16_gflops = 0;   // TDPBF16PS on AMX tiles; 0 without usable AMX
  std::optional<double> load_1min;  // the load average when it was taken
  // The GPU's GEMM peaks (sgemm_gflops, tf32_gemm_gflops, bf16_gemm_gflops, fp16_gemm_gflops),
  // measured once, at the start of a run that has CUDA variants.
  std::map<std::string, double> gpu_gflops;
  // The bandwidth roofs (GB/s): the CPU's STREAM triad and read-only sum on all threads, at every
  // check of a run with a case left of the ridge; the GPU's device-to-device copy, at the start
  // of a run with CUDA variants. 0 where not measured.
  double cpu_triad_gbps = 0;
  double cpu_read_gbps = 0;
  double gpu_copy_gbps = 0;
  // In a merged run: the shard ("I/N") whose session took it. Such a check rates only that
  // shard's records (each ran on its own node). Empty in a run of one folder.
  std::string shard;
  // How the check was sized (peak_sizing_json): each loop's trials and time budget, the triad's
  // array bytes, or why the bandwidth was not measured. Null in checks written before it existed.
  nlohmann::ordered_json sizing;

  // One line of peaks.jsonl.
  nlohmann::ordered_json to_json() const;
  // Why a peaks.jsonl line cannot be read (a rate that is not a number from 0 to 1e9, a negative
  // load), or empty.
  static std::string problem(const nlohmann::ordered_json& line);
  // Reads what to_json wrote (missing or null values read 0); throws std::runtime_error for
  // something that is not an object.
  static PeakCheck from_json(const nlohmann::ordered_json& line);
};

// Checks further apart than this (highest over lowest, minus one) flag the run.
inline constexpr double peak_disagreement_limit = 0.10;

class PeakChecks {
 public:
  void add(PeakCheck check) { checks_.push_back(std::move(check)); }
  const std::vector<PeakCheck>& checks() const { return checks_; }
  bool empty() const { return checks_.empty(); }

  // The bandwidth roof of a device: the best check of its best bandwidth ("cpu": the read-only
  // sum or the triad, whichever is higher; "cuda": the copy), GB/s, and that check's peaks.jsonl
  // name; 0 and "" when no check measured one.
  struct BandwidthRoof {
    double gbps = 0;
    std::string name;
  };
  BandwidthRoof bandwidth_roof(const std::string& device) const;
  double best_bandwidth(const std::string& device) const { return bandwidth_roof(device).gbps; }

  // The CPU's compute roof for records of `dtype` ("fp32", "bf16", ...): one per dtype per
  // folder, chosen from every check in it. bf16 runs on whichever of the FMA units (widened),
  // vdpbf16ps and AMX tiles this machine does fastest, so its roof is the highest of the three
  // checks; every other dtype's is the FMA loop's. A peaks.jsonl name.
  std::string cpu_roof(const std::string& dtype) const;

  // The best check of a peak ("cpu_fma_gflops", "cpu_bf16_dot_gflops" or a GPU GEMM's name):
  // interference only slows a measurement down, so the highest is the machine's; 0 for other
  // names or no checks.
  double best(const std::string& peak_name) const;

  // "cpu_fma_gflops checks disagree: 114 (start) to 235 (end) GFLOP/s, 106% apart", or empty
  // when they are within peak_disagreement_limit (or there is only one).
  std::string disagreement(const std::string& peak_name) const;

  // "cpu_read_gbps checks disagree: 49.1 (start) to 72.7 (end) GB/s, 48% apart" for a bandwidth
  // roof's name (cpu_read_gbps, cpu_triad_gbps, gpu_copy_gbps), or empty as disagreement(). A
  // host whose memory moves between states within a run rates a record left of the ridge against
  // the best state's check, one the record may not have had.
  std::string bandwidth_disagreement(const std::string& bandwidth_name) const;

  // "other work ran during the end check: the FMA loop sustained 190 of the best 380 GFLOP/s",
  // for each check whose sustained rate is over peak_disagreement_limit below its best; empty
  // when none is.
  std::string busy_checks() const;
  // How many checks busy_checks() names.
  int busy_check_count() const;

  // The check other work disturbed most, in one sentence: "worst check: the end check's FMA loop
  // sustained 190 of the best 380 GFLOP/s (50%)" (its sustained rate, else its best trial,
  // against the best trial of any check); empty where no check ran the FMA loop.
  std::string worst_check() const;

  // Every reason the checks give to doubt a record read against `peak_name`: disagreement and
  // busy_checks, joined by "; ".
  std::string doubts(const std::string& peak_name) const;

  // The checks that rate a record of `shard` (a merged run's "I/N"; empty for a run of one
  // folder): those of that shard, and those that name no shard.
  PeakChecks for_shard(const std::string& shard) const;

  // What a reader says of the checks as a whole (`attnbench export`'s "peak_check_summary"):
  // {"disagreement_limit", "best": the best check of each peak measured, "busy_checks" and
  // "busy_check_count" (each shard's checks against that shard's best), "worst_check"}.
  nlohmann::ordered_json summary_json() const;

  // The manifest's "peak_checks" list of folders written before peaks.jsonl existed.
  nlohmann::ordered_json to_json() const;
  // Reads such a list; an absent or malformed list gives no checks.
  static PeakChecks from_json(const nlohmann::ordered_json& list);

 private:
  std::vector<PeakCheck> checks_;
};

// Measures the all-thread CPU peaks now (about a fifth of a second, the triad's quarter more
// when `with_bandwidth`), with the load average.
PeakCheck measure_peak_check(const std::string& when, bool with_bandwidth);

// How each check of `peaks` was sized: {"fma_all_threads": {"trials", "budget_ms", "elapsed_ms"},
// ..., "sgemm": {..., "n"}, "triad": {"measured", "reason", "array_bytes", "trials", "budget_ms",
// "sizing"}}; only the checks that ran.
nlohmann::ordered_json peak_sizing_json(const CpuPeaks& peaks);

// The record as every reader shows it: the stored facts, in schema order, with peak_gflops,
// percent_of_peak, disturbed and disturbed_reason derived against `checks` (the folder's):
// - peak_gflops: the best check of the record's peak_name (of its shard, in a merged run); where
//   no check measures that peak (a record brought by `attnbench append` with a peak of its own,
//   or one written before peaks.jsonl), the record's stored peak_gflops.
// - percent_of_peak: 100 * gflops / peak_gflops; null when untimed or no peak is known.
// - disturbed_reason: for a CPU record whose peak the checks measure, their doubts; and a record
//   above 100% of its peak (the peak read low).
// - unrated_reason: for a timed record with no percent_of_peak, why (no check measured its peak).
// - peak_gbps: the best bandwidth check of the record's device; ridge_intensity: peak_gflops over
//   it, the FLOPs per byte where the two roofs meet; percent_of_bandwidth: bytes_moved per second
//   against peak_gbps, for a record below the ridge only (above it the compute roof bounds the
//   case and percent_of_peak says how close it came); null where any of them is unknown.
// A record written before peaks.jsonl (it stores percent_of_peak) in a folder that kept no checks
// keeps the rating it was written with.
nlohmann::ordered_json rate_record(const nlohmann::ordered_json& stored, const PeakChecks& checks);

// The manifest's "peaks" summary set to the best checks so far, and the doubts that flag the
// run's fp32 records. A summary for people: readers rate records from peaks.jsonl.
void write_peaks_summary(nlohmann::ordered_json& manifest, const PeakChecks& checks);

}  // namespace attnbench
