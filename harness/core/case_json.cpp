#include "harness/core/case_json.h"

#include <fmt/format.h>

#include <stdexcept>

#include "harness/core/work_count.h"

namespace attnbench {

nlohmann::ordered_json case_json(const Case& c) {
  const Shape& s = c.shape;
  const WorkCount work = count_work(s);
  return {{"index", c.index},
          {"id", c.id},
          {"variant", c.variant},
          {"batch", s.batch},
          {"heads", s.heads},
          {"kv_heads", s.kv_heads},
          {"seq_q", s.seq_q},
          {"seq_kv", s.seq_kv},
          {"d_k", s.d_k},
          {"d_v", s.d_v},
          {"causal", s.causal},
          {"dtype", to_string(s.dtype)},
          {"layout", to_string(s.layout)},
          {"element_bytes", element_bytes(s.dtype)},
          {"pairs", work.pairs},
          {"flops", work.flops},
          {"flop_convention", work.flop_convention},
          {"bytes", work.min_bytes},
          {"description", describe(s)}};
}

Shape shape_from_json(const nlohmann::json& object) {
  if (!object.is_object()) throw std::runtime_error("case: expected a JSON object");
  auto integer = [&](const char* key) {
    if (!object.contains(key) || !object[key].is_number_integer())
      throw std::runtime_error(fmt::format("case: '{}' missing or not an integer", key));
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
  if (!object.contains("causal") || !object["causal"].is_boolean())
    throw std::runtime_error("case: 'causal' missing or not true/false");
  s.causal = object["causal"].get<bool>();
  const auto dtype = parse_dtype(text("dtype", "fp32"));
  if (!dtype) throw std::runtime_error("case: 'dtype' is not one of fp32, bf16, fp16");
  s.dtype = *dtype;
  const auto layout = parse_layout(text("layout", "bhsd"));
  if (!layout) throw std::runtime_error("case: 'layout' is not one of bhsd, bshd");
  s.layout = *layout;
  if (const std::string problem = validate(s); !problem.empty())
    throw std::runtime_error("case: " + problem);
  return s;
}

}  // namespace attnbench
