#include "harness/record.h"

namespace attnbench {

const char* to_string(CaseStatus status) {
  switch (status) {
    case CaseStatus::ok: return "ok";
    case CaseStatus::skipped: return "skipped";
    case CaseStatus::failed: return "failed";
  }
  return "unknown";
}

const std::vector<std::string>& record_fields() {
  static const std::vector<std::string> fields = {"case_index",
                                                  "case_id",
                                                  "variant",
                                                  "device",
                                                  "dtype",
                                                  "precision",
                                                  "batch",
                                                  "heads",
                                                  "kv_heads",
                                                  "seq_q",
                                                  "seq_kv",
                                                  "d_k",
                                                  "d_v",
                                                  "causal",
                                                  "status",
                                                  "reason",
                                                  "time_ms_median",
                                                  "time_ms_min",
                                                  "time_ms_max",
                                                  "cv",
                                                  "noisy",
                                                  "iterations",
                                                  "repetitions",
                                                  "flops",
                                                  "flop_convention",
                                                  "gflops",
                                                  "gbps",
                                                  "bytes",
                                                  "workspace_bytes",
                                                  "peak_gflops",
                                                  "percent_of_peak",
                                                  "oracle_max_abs_err",
                                                  "oracle_rel_l2_err",
                                                  "oracle_sampled",
                                                  "oracle_after_rel_l2_err",
                                                  "threads",
                                                  "distribution"};
  return fields;
}

nlohmann::ordered_json to_json(const CaseRecord& r) {
  const Shape& s = r.the_case.shape;
  nlohmann::ordered_json j;
  j["case_index"] = r.the_case.index;
  j["case_id"] = r.the_case.id;
  j["variant"] = r.the_case.variant;
  j["device"] = to_string(r.device);
  j["dtype"] = "fp32";  // storage type of Q, K, V and O
  j["precision"] = to_string(r.precision);
  j["batch"] = s.batch;
  j["heads"] = s.heads;
  j["kv_heads"] = s.kv_heads;
  j["seq_q"] = s.seq_q;
  j["seq_kv"] = s.seq_kv;
  j["d_k"] = s.d_k;
  j["d_v"] = s.d_v;
  j["causal"] = s.causal;
  j["status"] = to_string(r.status);
  j["reason"] = r.reason;
  const bool timed = r.timing.has_value();
  const double seconds = timed ? r.timing->median_ms / 1e3 : 0;
  const double gflops = timed && seconds > 0 ? r.work.flops / seconds / 1e9 : 0;
  auto timed_value = [timed](double value) {
    return timed ? nlohmann::ordered_json(value) : nullptr;
  };
  j["time_ms_median"] = timed_value(timed ? r.timing->median_ms : 0);
  j["time_ms_min"] = timed_value(timed ? r.timing->min_ms : 0);
  j["time_ms_max"] = timed_value(timed ? r.timing->max_ms : 0);
  j["cv"] = timed_value(timed ? r.timing->cv : 0);
  j["noisy"] = timed ? nlohmann::ordered_json(r.timing->cv > noisy_cv) : nullptr;
  j["iterations"] = timed ? nlohmann::ordered_json(r.timing->iterations) : nullptr;
  j["repetitions"] = timed ? nlohmann::ordered_json(r.timing->repetitions) : nullptr;
  j["flops"] = r.work.flops;
  j["flop_convention"] = r.work.flop_convention;
  j["gflops"] = timed_value(gflops);
  j["gbps"] = timed_value(timed && seconds > 0 ? r.work.min_bytes / seconds / 1e9 : 0);
  j["bytes"] = r.work.min_bytes;
  j["workspace_bytes"] = r.workspace_bytes ? nlohmann::ordered_json(*r.workspace_bytes) : nullptr;
  j["peak_gflops"] = r.peak_gflops > 0 ? nlohmann::ordered_json(r.peak_gflops) : nullptr;
  j["percent_of_peak"] =
      timed && r.peak_gflops > 0 ? nlohmann::ordered_json(100.0 * gflops / r.peak_gflops) : nullptr;
  j["oracle_max_abs_err"] = r.oracle ? nlohmann::ordered_json(r.oracle->max_abs_err) : nullptr;
  j["oracle_rel_l2_err"] = r.oracle ? nlohmann::ordered_json(r.oracle->rel_l2_err) : nullptr;
  j["oracle_sampled"] = r.oracle ? nlohmann::ordered_json(r.oracle->sampled) : nullptr;
  j["oracle_after_rel_l2_err"] =
      r.oracle_after ? nlohmann::ordered_json(r.oracle_after->rel_l2_err) : nullptr;
  j["threads"] = r.threads;
  j["distribution"] = r.distribution;
  return j;
}

}  // namespace attnbench
