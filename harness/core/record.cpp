#include "harness/core/record.h"

#include "harness/core/named_values.h"
#include "harness/core/shape_fields.h"

namespace attnbench {

const char* to_string(CaseStatus status) {
  switch (status) {
    case CaseStatus::ok: return "ok";
    case CaseStatus::skipped: return "skipped";
    case CaseStatus::failed: return "failed";
  }
  return "unknown";
}

const std::vector<CaseStatus>& all_case_statuses() {
  static const std::vector<CaseStatus> all = {CaseStatus::ok, CaseStatus::skipped,
                                              CaseStatus::failed};
  return all;
}

std::optional<CaseStatus> parse_case_status(const std::string& name) {
  return value_named(all_case_statuses(), name);
}

namespace {

using Json = nlohmann::ordered_json;

// A value that exists only for timed records (null otherwise).
template <class Get>
Json when_timed(const CaseRecord& r, Get get) {
  return r.timing ? Json(get(*r.timing)) : Json(nullptr);
}

double seconds(const CaseRecord& r) { return r.timing ? r.timing->median_ms / 1e3 : 0; }

Json gflops(const CaseRecord& r) {
  return r.timing && seconds(r) > 0 ? Json(r.work.flops / seconds(r) / 1e9) : Json(nullptr);
}

// A value of the stopping rule: null when the record had no target.
template <class Get>
Json when_targeted(const CaseRecord& r, Get get) {
  return r.timing && r.timing->target_rel_ci > 0 ? Json(get(*r.timing)) : Json(nullptr);
}

template <class Get>
Json when_interval(const CaseRecord& r, Get get) {
  return r.timing && r.timing->ci_valid ? Json(get(*r.timing)) : Json(nullptr);
}

}  // namespace

double record_gflops(const CaseRecord& r) {
  return r.timing && seconds(r) > 0 ? r.work.flops / seconds(r) / 1e9 : 0;
}

const std::vector<RecordField>& record_schema() {
  static const std::vector<RecordField> schema = [] {
    std::vector<RecordField> fields = {
        {"case_index", "integer", "position in the full, unsharded sweep",
         [](const CaseRecord& r) { return Json(r.sweep_case.index); }},
        {"case_id", "string", "stable key: variant, shape, mask, dtype and layout",
         [](const CaseRecord& r) { return Json(r.sweep_case.id); }},
        {"variant", "string", "registered variant name",
         [](const CaseRecord& r) { return Json(r.sweep_case.variant); }},
        {"device", "string", "cpu or cuda",
         [](const CaseRecord& r) { return Json(to_string(r.device)); }},
    };
    // The shape's fields, as shape_fields() writes them.
    for (const ShapeField& field : shape_fields()) {
      fields.push_back(
          {field.name, field.type, field.description,
           [value = field.value](const CaseRecord& r) { return value(r.sweep_case.shape); }});
    }
    const std::vector<RecordField> measured = {
        {"element_bytes", "integer", "bytes per element of Q, K, V and O",
         [](const CaseRecord& r) { return Json(element_bytes(r.sweep_case.shape.dtype)); }},
        {"precision", "string", "the variant's arithmetic: fp32 accumulation or tf32",
         [](const CaseRecord& r) { return Json(to_string(r.precision)); }},
        {"status", "string", "ok, skipped or failed",
         [](const CaseRecord& r) { return Json(to_string(r.status)); }},
        {"reason", "string", "why skipped or failed; empty when ok",
         [](const CaseRecord& r) { return Json(r.reason); }},
        {"time_ms_median", "number|null", "median milliseconds per pass (the case's pass)",
         [](const CaseRecord& r) {
           return when_timed(r, [](const TimingStats& t) { return t.median_ms; });
         }},
        {"time_ms_min", "number|null", "fastest timed repetition mean",
         [](const CaseRecord& r) {
           return when_timed(r, [](const TimingStats& t) { return t.min_ms; });
         }},
        {"time_ms_max", "number|null", "slowest timed repetition mean",
         [](const CaseRecord& r) {
           return when_timed(r, [](const TimingStats& t) { return t.max_ms; });
         }},
        {"cv", "number|null", "coefficient of variation over the timed iterations",
         [](const CaseRecord& r) {
           return when_timed(r, [](const TimingStats& t) { return t.cv; });
         }},
        {"noisy", "boolean|null", "cv above the noisy threshold (0.10)",
         [](const CaseRecord& r) {
           return when_timed(r, [](const TimingStats& t) { return t.cv > noisy_cv; });
         }},
        {"ci_low_ms", "number|null",
         "low end of the median's 95% confidence interval (order statistics; null under 6 samples)",
         [](const CaseRecord& r) {
           return when_interval(r, [](const TimingStats& t) { return t.ci_low_ms; });
         }},
        {"ci_high_ms", "number|null", "high end of the median's 95% confidence interval",
         [](const CaseRecord& r) {
           return when_interval(r, [](const TimingStats& t) { return t.ci_high_ms; });
         }},
        {"rel_ci_half_width", "number|null", "(ci_high_ms - ci_low_ms) / 2 / time_ms_median",
         [](const CaseRecord& r) {
           return when_interval(r, [](const TimingStats& t) { return t.rel_ci_half_width; });
         }},
        {"target_rel_ci", "number|null",
         "the stopping rule's target for rel_ci_half_width (measure.target_rel_ci); null if none",
         [](const CaseRecord& r) {
           return when_targeted(r, [](const TimingStats& t) { return t.target_rel_ci; });
         }},
        {"target_reached", "boolean|null",
         "rel_ci_half_width reached target_rel_ci before measure.max_time_s was spent",
         [](const CaseRecord& r) {
           return when_targeted(r, [](const TimingStats& t) { return t.target_reached; });
         }},
        {"iterations", "integer|null", "timed iterations in all: the samples of the median",
         [](const CaseRecord& r) {
           return when_timed(r, [](const TimingStats& t) { return t.iterations; });
         }},
        {"repetitions", "integer|null", "Google Benchmark repetitions (rounds, when interleaved)",
         [](const CaseRecord& r) {
           return when_timed(r, [](const TimingStats& t) { return t.repetitions; });
         }},
        {"runs_per_sample", "integer|null",
         "back-to-back passes in one timed sample (1 in older records); times are per pass",
         [](const CaseRecord& r) {
           return when_timed(r, [](const TimingStats& t) { return t.runs_per_sample; });
         }},
        {"interleaved", "boolean|null",
         "timed in rounds alternating with the other variants of this shape (measure.interleave)",
         [](const CaseRecord& r) {
           return when_timed(r, [](const TimingStats& t) { return t.interleaved; });
         }},
        {"round_times_ms", "array|null",
         "each repetition's mean time, in order: one per round when interleaved (cases.jsonl only)",
         [](const CaseRecord& r) {
           return when_timed(r, [](const TimingStats& t) { return t.repetition_means_ms; });
         },
         false},
        {"flops", "number",
         "FLOPs of one pass, 2*B*H*pairs*(d_k+d_v) (x2.5 for bwd, x3.5 for fwd_bwd)",
         [](const CaseRecord& r) { return Json(r.work.flops); }},
        {"flop_convention", "string", "how pairs were counted (masks: unmasked pairs only)",
         [](const CaseRecord& r) { return Json(r.work.flop_convention); }},
        {"dense_flops", "number", "FLOPs over all seq_q*seq_kv pairs, as if nothing were masked",
         [](const CaseRecord& r) { return Json(r.work.dense_flops); }},
        {"density", "number", "unmasked pairs / (seq_q*seq_kv): flops / dense_flops",
         [](const CaseRecord& r) { return Json(r.work.density); }},
        {"gflops", "number|null", "flops / median time",
         [](const CaseRecord& r) { return gflops(r); }},
        {"gbps", "number|null", "bytes / median time",
         [](const CaseRecord& r) {
           return r.timing && seconds(r) > 0 ? Json(r.work.min_bytes / seconds(r) / 1e9)
                                             : Json(nullptr);
         }},
        {"bytes", "number",
         "minimum bytes moved: Q, K, V read and O written once, at element_bytes",
         [](const CaseRecord& r) { return Json(r.work.min_bytes); }},
        {"bytes_moved", "number",
         "bytes: K and V once per KV head and sequence at their dtype (a quantized cache: 1-byte "
         "codes "
         "plus its fp32 scales), Q, O, the block table",
         [](const CaseRecord& r) { return Json(r.work.min_bytes); }},
        {"arithmetic_intensity", "number", "flops / bytes_moved (FLOPs per byte): the roofline's x",
         [](const CaseRecord& r) {
           return Json(r.work.min_bytes > 0 ? r.work.flops / r.work.min_bytes : 0.0);
         }},
        {"workspace_bytes", "integer|null", "peak scratch memory through the workspace allocator",
         [](const CaseRecord& r) {
           return r.workspace_bytes ? Json(*r.workspace_bytes) : Json(nullptr);
         }},
        {"saved_for_backward_bytes", "integer|null",
         "of workspace_bytes, what the forward keeps for the backward (P, or the log-sum-exp); 0 "
         "for forward cases",
         [](const CaseRecord& r) {
           return r.saved_for_backward_bytes ? Json(*r.saved_for_backward_bytes) : Json(nullptr);
         }},
        {"peak_gflops", "number|null",
         "the measured peak this record is read against: the best check of peak_name in the "
         "folder's peaks.jsonl (of the record's shard, in a merged run), derived when read; stored "
         "only by records measured elsewhere (`attnbench append`) against a peak of their own",
         [](const CaseRecord& r) {
           return r.peak_gflops > 0 ? Json(r.peak_gflops) : Json(nullptr);
         }},
        {"peak_name", "string",
         "which peak the record is read against (a peaks.jsonl key): as stored, the writer's "
         "choice; as read, a CPU record's is its dtype's roof from every check in the folder "
         "(bf16: "
         "the highest of cpu_fma_gflops, cpu_bf16_dot_gflops, cpu_amx_bf16_gflops; otherwise "
         "cpu_fma_gflops), one per dtype",
         [](const CaseRecord& r) { return Json(r.peak_name); }},
        {"percent_of_peak", "number|null",
         "100 * gflops / peak_gflops; derived when read, never stored in cases.jsonl", nullptr,
         true, true},
        {"peak_gbps", "number|null",
         "the bandwidth roof: the best check of the device's best bandwidth in peaks.jsonl (CPU: a "
         "read-only sum or the STREAM triad on all threads, whichever is higher; GPU: "
         "device-to-device copy), GB/s; derived when read",
         nullptr, true, true},
        {"bandwidth_name", "string",
         "which check peak_gbps is (cpu_read_gbps, cpu_triad_gbps, gpu_copy_gbps); empty when none "
         "measured one; derived when read",
         nullptr, true, true},
        {"ridge_intensity", "number|null",
         "peak_gflops / peak_gbps: the FLOPs per byte where the roofs meet; derived when read",
         nullptr, true, true},
        {"percent_of_bandwidth", "number|null",
         "100 * bytes_moved per second / peak_gbps, for a record below the ridge (null above it, "
         "where percent_of_peak bounds it); derived when read",
         nullptr, true, true},
        {"disturbed", "boolean",
         "other work disturbed the numbers: the folder's peak checks disagree by over 10% or one "
         "saw "
         "other work running, or the record is above 100% of the peak; derived when read, never "
         "stored in cases.jsonl",
         nullptr, true, true},
        {"disturbed_reason", "string",
         "why disturbed; empty when not; derived when read, never stored in cases.jsonl", nullptr,
         true, true},
        {"unrated_reason", "string",
         "why a timed record has no percent_of_peak (no peak check measured its peak_name: a run "
         "with measure.peaks = skip takes none); empty when rated or untimed; derived when read",
         nullptr, true, true},
        {"oracle_max_abs_err", "number|null", "largest |o - reference| before timing",
         [](const CaseRecord& r) {
           return r.oracle ? Json(r.oracle->max_abs_err) : Json(nullptr);
         }},
        {"oracle_rel_l2_err", "number|null",
         "||o - reference|| / max(||reference||, ||its terms p v||) before timing",
         [](const CaseRecord& r) { return r.oracle ? Json(r.oracle->rel_l2_err) : Json(nullptr); }},
        {"oracle_rel_l2_tolerance", "number|null", "the tolerance applied (dtype's, score-scaled)",
         [](const CaseRecord& r) {
           return r.oracle ? Json(r.oracle->rel_l2_tolerance) : Json(nullptr);
         }},
        {"oracle_sampled", "boolean|null", "rows were sampled (large shapes)",
         [](const CaseRecord& r) { return r.oracle ? Json(r.oracle->sampled) : Json(nullptr); }},
        {"oracle_after_rel_l2_err", "number|null", "the re-check after timing",
         [](const CaseRecord& r) {
           return r.oracle_after ? Json(r.oracle_after->rel_l2_err) : Json(nullptr);
         }},
        {"kv_quant_rel_l2_err", "number|null",
         "a quantized cache's own error: ||O(dequantized K, V) - O(K, V)|| / ||O(K, V)||, both "
         "float64 "
         "references over the oracle's rows; null when K and V are in the case's dtype",
         [](const CaseRecord& r) {
           return r.kv_quant_rel_l2_err ? Json(*r.kv_quant_rel_l2_err) : Json(nullptr);
         }},
        {"threads", "integer", "OpenMP threads of a CPU variant; 0 on the GPU",
         [](const CaseRecord& r) { return Json(r.threads); }},
        {"distribution", "string", "input distribution timed",
         [](const CaseRecord& r) { return Json(r.distribution); }},
        {"code_path", "string",
         "code path a CPU variant chose at run time (e.g. avx512_bf16); empty if it has one "
         "(records "
         "written before it had this name call it isa)",
         [](const CaseRecord& r) { return Json(r.code_path); }},
    };
    fields.insert(fields.end(), measured.begin(), measured.end());
    return fields;
  }();
  return schema;
}

const std::vector<std::string>& record_fields() {
  static const std::vector<std::string> fields = [] {
    std::vector<std::string> names;
    for (const RecordField& field : record_schema()) names.emplace_back(field.name);
    return names;
  }();
  return fields;
}

const std::vector<std::string>& csv_fields() {
  static const std::vector<std::string> fields = [] {
    std::vector<std::string> names;
    for (const RecordField& field : record_schema())
      if (field.in_csv) names.emplace_back(field.name);
    return names;
  }();
  return fields;
}

nlohmann::ordered_json to_json(const CaseRecord& record) {
  Json j = Json::object();
  for (const RecordField& field : record_schema())
    if (!field.derived) j[field.name] = field.value(record);
  return j;
}

nlohmann::ordered_json schema_json() {
  Json fields = Json::array();
  for (const RecordField& field : record_schema()) {
    fields.push_back({{"name", field.name},
                      {"type", field.type},
                      {"description", field.description},
                      {"in_csv", field.in_csv},
                      {"derived", field.derived}});
  }
  return {{"schema_version", kSchemaVersion}, {"fields", fields}};
}

}  // namespace attnbench
