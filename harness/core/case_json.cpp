#include "harness/core/case_json.h"

#include <fmt/format.h>

#include <limits>
#include <stdexcept>

#include "harness/core/shape_fields.h"
#include "harness/core/work_count.h"

namespace attnbench {

nlohmann::ordered_json case_json(const Case& c) {
  const Shape& s = c.shape;
  const WorkCount work = count_work(s);
  nlohmann::ordered_json entry = {{"index", c.index}, {"id", c.id}, {"variant", c.variant}};
  for (const ShapeField& field : shape_fields()) entry[field.name] = field.value(s);
  const nlohmann::ordered_json work_fields = {{"element_bytes", element_bytes(s.dtype)},
                                              {"pairs", work.pairs},
                                              {"flops", work.flops},
                                              {"flop_convention", work.flop_convention},
                                              {"dense_flops", work.dense_flops},
                                              {"density", work.density},
                                              {"bytes", work.min_bytes},
                                              {"description", describe(s)}};
  entry.update(work_fields);
  return entry;
}

namespace {

// "mask" (with "doc_lens" for documents) when given, else "causal" alone, as records written
// before the mask axis have it; when both are given they must agree.
MaskSpec mask_from_json(const nlohmann::json& object) {
  const bool has_causal = object.contains("causal");
  if (has_causal && !object["causal"].is_boolean())
    throw std::runtime_error("case: 'causal' is not true/false");
  if (!object.contains("mask") || object["mask"].is_null()) {
    if (!has_causal) throw std::runtime_error("case: needs 'mask' (or 'causal')");
    return object["causal"].get<bool>() ? MaskSpec::causal() : MaskSpec::none();
  }
  if (!object["mask"].is_string()) throw std::runtime_error("case: 'mask' is not a string");
  std::string error;
  auto mask = parse_mask(object["mask"].get<std::string>(), &error);
  if (!mask) throw std::runtime_error("case: 'mask': " + error);
  if (has_causal && object["causal"].get<bool>() != (mask->kind == MaskKind::causal)) {
    throw std::runtime_error(fmt::format("case: 'causal' ({}) disagrees with 'mask' ({})",
                                         object["causal"].get<bool>(), to_string(*mask)));
  }
  if (mask->kind == MaskKind::documents) {
    const auto lengths = object.find("doc_lens");
    if (lengths == object.end() || !lengths->is_array())
      throw std::runtime_error("case: the documents mask needs 'doc_lens', an array of lengths");
    for (const auto& length : *lengths) {
      if (!length.is_number_integer())
        throw std::runtime_error("case: 'doc_lens' holds a value that is not an integer");
      mask->doc_lens.push_back(length.get<int64_t>());
    }
  }
  return *mask;
}

}  // namespace

Shape shape_from_json(const nlohmann::json& object) {
  if (!object.is_object()) throw std::runtime_error("case: expected a JSON object");
  auto integer = [&](const char* key) {
    if (!object.contains(key) || !object[key].is_number_integer())
      throw std::runtime_error(fmt::format("case: '{}' missing or not an integer", key));
    // Read as int64_t, an unsigned value past its range would wrap to a negative one.
    if (object[key].is_number_unsigned() &&
        object[key].get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw std::runtime_error(fmt::format("case: '{}' is {}, past the largest integer (2^63 - 1)",
                                           key, object[key].get<uint64_t>()));
    return object[key].get<int64_t>();
  };
  auto text = [&](const char* key, const char* fallback) {
    if (!object.contains(key)) return std::string(fallback);
    if (!object[key].is_string())
      throw std::runtime_error(fmt::format("case: '{}' is not a string", key));
    return object[key].get<std::string>();
  };
  Shape s;
  s.batch = integer("batch");
  s.heads = integer("heads");
  s.kv_heads = integer("kv_heads");
  s.seq_q = integer("seq_q");
  s.seq_kv = integer("seq_kv");
  s.d_k = integer("d_k");
  s.d_v = integer("d_v");
  s.set_mask(mask_from_json(object));
  if (object.contains("alibi")) {
    if (!object["alibi"].is_boolean()) throw std::runtime_error("case: 'alibi' is not true/false");
    s.alibi = object["alibi"].get<bool>();
  }
  if (object.contains("softcap")) {
    if (!object["softcap"].is_number()) throw std::runtime_error("case: 'softcap' is not a number");
    s.softcap = object["softcap"].get<double>();
  }
  const auto dtype = parse_dtype(text("dtype", "fp32"));
  if (!dtype) throw std::runtime_error("case: 'dtype' is not one of fp32, bf16, fp16");
  s.dtype = *dtype;
  const auto layout = parse_layout(text("layout", "bhsd"));
  if (!layout) throw std::runtime_error("case: 'layout' is not one of bhsd, bshd");
  s.layout = *layout;
  // Serving fields, absent from cases written before them: contiguous, not ragged.
  std::string kv_cache_error;
  const auto kv_cache = parse_kv_cache(text("kv_cache", "contiguous"), &kv_cache_error);
  if (!kv_cache) throw std::runtime_error("case: " + kv_cache_error);
  s.kv_cache = *kv_cache;
  if (object.contains("kv_lens") && !object["kv_lens"].is_null()) {
    const auto& lengths = object["kv_lens"];
    if (!lengths.is_array()) throw std::runtime_error("case: 'kv_lens' is not an array or null");
    for (const auto& length : lengths) {
      if (!length.is_number_integer())
        throw std::runtime_error("case: a 'kv_lens' entry is not an integer");
      s.kv_lens.push_back(length.get<int64_t>());
    }
  }
  // Written as the case's dtype when unquantized (kv_dtype_name); absent before the axis.
  const std::string kv_dtype_text = text("kv_dtype", to_string(s.dtype));
  if (kv_dtype_text != to_string(s.dtype)) {
    std::string kv_dtype_error;
    const auto kv_dtype = parse_kv_dtype(kv_dtype_text, &kv_dtype_error);
    if (!kv_dtype) throw std::runtime_error("case: " + kv_dtype_error);
    s.kv_dtype = *kv_dtype;
  }
  // Cases written before the pass axis are forward cases.
  const auto pass = parse_pass(text("pass", "fwd"));
  if (!pass) throw std::runtime_error("case: 'pass' is not one of fwd, bwd, fwd_bwd");
  s.pass = *pass;
  if (const std::string problem = validate(s); !problem.empty())
    throw std::runtime_error("case: " + problem);
  return s;
}

}  // namespace attnbench
