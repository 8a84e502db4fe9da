// attnbench attend: one variant on the user's own tensors from .npy files. float16 files run in
// fp16; float32 files in fp32, or rounded once on load to --dtype bf16 / fp16 (the .npy format has
// no bf16). O (and the weights) are written as float32. With --backward (dO given) the variant's
// forward runs, then its backward, and dQ, dK, dV are written: float32, or float16 for float16
// inputs.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "harness/cli/commands.h"
#include "harness/core/element_types.h"
#include "harness/core/pass.h"
#include "harness/measure/attend_memory.h"
#include "harness/measure/checked_run.h"
#include "harness/measure/executor.h"
#include "harness/measure/kv_quantizer.h"
#include "harness/measure/out_of_memory.h"
#include "harness/measure/paged_cache.h"
#include "harness/results/npy_io.h"
#include "harness/results/output_files.h"
#include "harness/variant/registry.h"

namespace attnbench {

namespace {

struct AttendArguments {
  std::string variant;
  std::string q_path, k_path, v_path, out_path, weights_path;
  bool causal = false;
  std::string mask;               // empty: none, or causal with --causal
  std::vector<int64_t> doc_lens;  // for --mask documents
  bool alibi = false;
  double softcap = 0;
  std::optional<double> scale;
  std::string dtype;  // empty: the files' own (fp32, or fp16 for float16 files)
  std::string layout = "bhsd";
  std::string kv_dtype = "dtype";       // or int8, fp8_e4m3: K and V quantized once before the call
  std::string kv_cache = "contiguous";  // or paged:P: K and V laid out in pages before the call
  // One cache length per sequence ("5,300,2"); absent: not ragged (given empty, refused).
  std::optional<std::string> kv_lens;
  bool backward = false;  // also implied by any of the paths below
  std::string dout_path, dq_path, dk_path, dv_path;
};

// Whether the backward runs: --backward, or any of its files, which must then all be given; O is
// then optional, else required.
bool backward_requested(const AttendArguments& args) {
  const std::pair<const char*, const std::string*> files[] = {{"--dout", &args.dout_path},
                                                              {"--dq", &args.dq_path},
                                                              {"--dk", &args.dk_path},
                                                              {"--dv", &args.dv_path}};
  bool any = args.backward;
  std::vector<std::string> missing;
  for (const auto& [flag, path] : files) {
    any = any || !path->empty();
    if (path->empty()) missing.emplace_back(flag);
  }
  if (any && !missing.empty()) {
    throw UsageError(fmt::format("the backward needs --dout, --dq, --dk and --dv (missing {})",
                                 fmt::join(missing, ", ")));
  }
  if (!any && args.out_path.empty()) throw UsageError("--out is required");
  if (any && !args.weights_path.empty())
    throw UsageError("--weights is for the forward alone: leave it out with the backward");
  return any;
}

// The files attend writes, each with its flag (an empty path: not given).
std::vector<FlagPath> output_files(const AttendArguments& args) {
  return {{"--out", args.out_path},
          {"--weights", args.weights_path},
          {"--dq", args.dq_path},
          {"--dk", args.dk_path},
          {"--dv", args.dv_path}};
}

// The files attend reads.
std::vector<FlagPath> input_files(const AttendArguments& args) {
  return {
      {"--q", args.q_path}, {"--k", args.k_path}, {"--v", args.v_path}, {"--dout", args.dout_path}};
}

// The dtype the problem runs in: the files' own type, or --dtype, which rounds float32 inputs.
DType problem_dtype(const std::string& requested, const NpyTensor& q, const NpyTensor& k,
                    const NpyTensor& v) {
  if (q.stored != k.stored || q.stored != v.stored)
    throw UsageError("Q, K and V must all be float32 or all float16");
  if (requested.empty()) return q.stored;
  const auto dtype = parse_dtype(requested);
  if (!dtype) throw UsageError(fmt::format("--dtype {}: expected fp32, bf16 or fp16", requested));
  if (q.stored == DType::fp16 && *dtype != DType::fp16)
    throw UsageError(fmt::format("--dtype {}: the inputs are float16 files", requested));
  return *dtype;
}

// [seq, d], [heads, seq, d] or [batch, heads, seq, d] as (batch, heads, seq, d).
std::array<int64_t, 4> as_four_dims(const NpyTensor& tensor, const std::string& name) {
  const auto& s = tensor.shape;
  if (s.size() < 2 || s.size() > 4) {
    throw UsageError(
        fmt::format("{} has rank {}; expected [seq, d], [heads, seq, d] or [batch, heads, seq, d]",
                    name, s.size()));
  }
  std::array<int64_t, 4> dims{1, 1, 1, 1};
  std::copy(s.begin(), s.end(), dims.begin() + (4 - s.size()));
  for (int64_t extent : dims) {
    if (extent <= 0) throw UsageError(fmt::format("{} has an empty dimension", name));
  }
  return dims;
}

// --mask (or --causal) and --doc-lens as a mask spec. "documents" takes its count from the
// lengths; "documents:K" must agree with them.
MaskSpec mask_from(const AttendArguments& args) {
  if (args.causal && !args.mask.empty() && args.mask != "causal")
    throw UsageError(fmt::format("--causal and --mask {} disagree: give one", args.mask));
  const std::string text = args.mask.empty() ? (args.causal ? "causal" : "none") : args.mask;
  if (text == "documents" || text.rfind("documents:", 0) == 0) {
    if (args.doc_lens.empty())
      throw UsageError(fmt::format("--mask {} needs --doc-lens, e.g. --doc-lens 3,5,8", text));
    MaskSpec mask = MaskSpec::documents(args.doc_lens);
    if (text != "documents") {
      std::string error;
      const auto given = parse_mask(text, &error);
      if (!given) throw UsageError("--mask: " + error);
      if (given->length != mask.length) {
        throw UsageError(fmt::format("--mask {} names {} documents but --doc-lens gives {}", text,
                                     given->length, mask.length));
      }
    }
    return mask;
  }
  if (!args.doc_lens.empty()) throw UsageError("--doc-lens is only for --mask documents");
  std::string error;
  const auto mask = parse_mask(text, &error);
  if (!mask) throw UsageError("--mask: " + error);
  return *mask;
}

Shape shape_from(const NpyTensor& q, const NpyTensor& k, const NpyTensor& v,
                 const AttendArguments& args) {
  if (q.shape.size() != k.shape.size() || q.shape.size() != v.shape.size()) {
    throw UsageError("Q, K and V must have the same rank");
  }
  const auto qd = as_four_dims(q, "Q"), kd = as_four_dims(k, "K"), vd = as_four_dims(v, "V");
  Shape s;
  s.batch = qd[0];
  s.heads = qd[1];
  s.kv_heads = kd[1];
  s.seq_q = qd[2];
  s.seq_kv = kd[2];
  s.d_k = qd[3];
  s.d_v = vd[3];
  s.set_mask(mask_from(args));
  s.alibi = args.alibi;
  if (const std::string problem = softcap_problem(args.softcap); !problem.empty())
    throw UsageError(fmt::format("--softcap {}: {}", args.softcap, problem));
  s.softcap = args.softcap;
  std::string error;
  const auto kv_cache = parse_kv_cache(args.kv_cache, &error);
  if (!kv_cache) throw UsageError("--kv-cache: " + error);
  s.kv_cache = *kv_cache;
  const auto kv_dtype = parse_kv_dtype(args.kv_dtype, &error);
  if (!kv_dtype) throw UsageError("--kv-dtype: " + error);
  s.kv_dtype = *kv_dtype;
  if (args.kv_lens) {
    const auto kv_lens = parse_kv_lens(*args.kv_lens, &error);
    if (!kv_lens) throw UsageError("--kv-lens: " + error);
    if (static_cast<int64_t>(kv_lens->size()) != s.batch) {
      throw UsageError(
          fmt::format("--kv-lens gives {} lengths but Q has batch {}", kv_lens->size(), s.batch));
    }
    s.kv_lens = *kv_lens;
  }
  if (kd[0] != s.batch || vd[0] != s.batch)
    throw UsageError("Q, K and V must have the same batch size");
  if (vd[1] != kd[1]) throw UsageError(fmt::format("K has {} heads but V has {}", kd[1], vd[1]));
  if (vd[2] != kd[2]) throw UsageError(fmt::format("K has {} keys but V has {}", kd[2], vd[2]));
  if (kd[3] != s.d_k) throw UsageError(fmt::format("Q has d_k {} but K has {}", s.d_k, kd[3]));
  if (const std::string problem = validate(s); !problem.empty()) throw UsageError(problem);
  return s;
}

// The scale multiplies every score: NaN, Inf or a value float32 cannot hold would make every
// output NaN.
float checked_scale(double scale) {
  if (!std::isfinite(scale) || std::fabs(scale) > std::numeric_limits<float>::max()) {
    throw UsageError(fmt::format("--scale {}: must be a finite float32 value", scale));
  }
  return static_cast<float>(scale);
}

void require_finite(const NpyTensor& tensor, const std::string& name, const std::string& path) {
  const auto bad = std::find_if(tensor.data.begin(), tensor.data.end(),
                                [](float x) { return !std::isfinite(x); });
  if (bad != tensor.data.end()) {
    throw UsageError(fmt::format("{} ({}): element {} is {}; inputs must be finite", name, path,
                                 bad - tensor.data.begin(), *bad));
  }
}

float largest_magnitude(const std::vector<float>& values) {
  float largest = 0;
  for (float x : values) largest = std::max(largest, std::fabs(x));
  return largest;
}

// Drops the leading dimensions the user's Q did not have.
std::vector<int64_t> output_shape(std::size_t rank, const Shape& s, int64_t last) {
  const std::vector<int64_t> full{s.batch, s.heads, s.seq_q, last};
  return std::vector<int64_t>(full.end() - static_cast<std::ptrdiff_t>(rank), full.end());
}

// The command's options, each into its field of `args`.
void add_attend_options(CLI::App* attend, AttendArguments& args) {
  attend->add_option("--variant", args.variant, "Variant name (see `attnbench list`)")->required();
  attend
      ->add_option("--q", args.q_path,
                   "Q: [seq, d_k], [heads, seq, d_k] or [batch, heads, seq, d_k]")
      ->required();
  attend->add_option("--k", args.k_path, "K: same rank as Q; may have fewer heads (GQA)")
      ->required();
  attend->add_option("--v", args.v_path, "V: same rank as Q, same heads and seq as K")->required();
  attend->add_flag("--causal", args.causal,
                   "Causal mask, aligned to the end when seq_q < seq_kv (as --mask causal)");
  attend->add_option("--mask", args.mask,
                     "Mask, aligned to the end: none, causal, window:L (L keys before the "
                     "query's own), prefix:P, documents (with --doc-lens)");
  attend
      ->add_option("--doc-lens", args.doc_lens,
                   "Document lengths for --mask documents, summing to seq: e.g. 3,5,8")
      ->delimiter(',');
  attend->add_flag("--alibi", args.alibi, "Add the ALiBi bias -slope_h * |p(i) - j|");
  attend->add_option("--softcap", args.softcap,
                     "Soft-cap the scaled scores: s -> c * tanh(s / c) (0: off)");
  attend->add_option("--scale", args.scale, "Score scale (default 1/sqrt(d_k))");
  attend->add_option("--out", args.out_path,
                     "Where to write O (.npy); required unless the backward runs");
  attend->add_option("--weights", args.weights_path, "Also write the attention weights (.npy)");
  attend->add_option("--dtype", args.dtype,
                     "Run in fp32, bf16 or fp16: float32 inputs are rounded to it once on load "
                     "(default: the files' type; float16 files run in fp16)");
  attend->add_option("--kv-cache", args.kv_cache,
                     "How K and V are stored for the call: contiguous (default) or paged:P "
                     "(pages of P tokens in a seeded shuffled pool, with a block table)");
  attend->add_option("--kv-dtype", args.kv_dtype,
                     "What K and V are stored in for the call: dtype (default: the case's), int8 "
                     "(a fp32 scale per token and KV head) or fp8_e4m3 (a fp32 scale per sequence "
                     "and KV head), quantized once from the files' values");
  attend->add_option("--kv-lens", args.kv_lens,
                     "A ragged batch: each sequence's cache length, e.g. 5,300,2 (the longest "
                     "is K's seq; sequence b reads its first kv_lens[b] keys)");
  attend->add_flag("--backward", args.backward,
                   "Also run the variant's backward: reads --dout, writes --dq, --dk, --dv");
  attend->add_option("--dout", args.dout_path, "dO, the gradient of O (.npy): O's shape");
  attend->add_option("--dq", args.dq_path, "Where to write dQ (.npy, Q's shape)");
  attend->add_option("--dk", args.dk_path, "Where to write dK (.npy, K's shape)");
  attend->add_option("--dv", args.dv_path, "Where to write dV (.npy, V's shape)");
  attend->add_option(
      "--layout", args.layout,
      "Memory layout the variant reads: bhsd (default) or bshd (the inputs are "
      "stored [batch, seq, heads, d] for it; files are always [batch, heads, seq, d])");
}

// Finite inputs near the float32 range overflow in the scores or the weighted sum (or, in the
// backward, in dP and the gradients): say so instead of writing an array of NaN, naming the
// largest magnitude of every input that took part (dO's too, in the backward).
void require_finite_result(const std::vector<float>& values, const char* what, const NpyTensor& q,
                           const NpyTensor& k, const NpyTensor& v,
                           const NpyTensor* dout = nullptr) {
  const auto bad =
      std::find_if(values.begin(), values.end(), [](float x) { return !std::isfinite(x); });
  if (bad == values.end()) return;
  const std::string dout_magnitude =
      dout != nullptr ? fmt::format(", |dO| {:g}", largest_magnitude(dout->data)) : "";
  throw UsageError(fmt::format(
      "{} has {} at element {}: the inputs are too large for float32 attention (largest |Q| "
      "{:g}, |K| {:g}, |V| {:g}{}); scale them down",
      what, *bad, bad - values.begin(), largest_magnitude(q.data), largest_magnitude(k.data),
      largest_magnitude(v.data), dout_magnitude));
}

// A gradient of float16 inputs is written in float16 unless one of its values is past float16's
// range (a GQA group's dV sums its heads' and can outgrow every input): that one is written in
// float32 instead of holding inf, and the returned note says so ("" when float16 holds it).
std::string store_gradient(NpyTensor& gradient, const char* name, DType inputs_stored) {
  gradient.stored = inputs_stored;
  if (inputs_stored != DType::fp16) return "";
  const float largest = largest_magnitude(gradient.data);
  if (std::isfinite(round_to(DType::fp16, largest))) return "";
  gradient.stored = DType::fp32;
  return fmt::format("{} written as float32: its largest |value| {:g} is past float16's range",
                     name, largest);
}

// dO must have O's shape exactly, as the forward writes it for Q's rank.
void require_output_shape(const NpyTensor& dout, const std::string& path,
                          const std::vector<int64_t>& expected) {
  if (dout.shape == expected) return;
  throw UsageError(fmt::format("--dout {}: shape [{}] but the output O is [{}]", path,
                               fmt::join(dout.shape, ", "), fmt::join(expected, ", ")));
}

// The variant registered under args.variant, or a one-line error naming those there are.
const RegisteredVariant& registered_variant(const std::string& name) {
  Registry::instance().check_names();
  const RegisteredVariant* registered = Registry::instance().find(name);
  if (registered == nullptr) {
    throw UsageError(fmt::format("unknown variant '{}' (known: {})", name,
                                 fmt::join(Registry::instance().names(), ", ")));
  }
  return *registered;
}

NpyTensor load_input(const char* name, const std::string& path) {
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  NpyTensor tensor =
      allocating(fmt::format("reading {} from {}", name, path),
                 error ? 0.0 : static_cast<double>(size), [&] { return load_npy(path); });
  require_finite(tensor, name, path);
  return tensor;
}

// Loads the inputs, runs the variant once (its forward, then its backward when asked), checks the
// results are finite and writes them as .npy files.
void attend_files(const AttendArguments& args) {
  const RegisteredVariant& registered = registered_variant(args.variant);
  const bool backward = backward_requested(args);
  require_distinct_outputs("attend", output_files(args), input_files(args));
  require_regular_outputs(output_files(args));
  const float scale = args.scale ? checked_scale(*args.scale) : 0.0f;
  const NpyTensor q = load_input("Q", args.q_path);
  const NpyTensor k = load_input("K", args.k_path);
  const NpyTensor v = load_input("V", args.v_path);
  Shape shape = shape_from(q, k, v, args);
  shape.dtype = problem_dtype(args.dtype, q, k, v);
  const auto layout = parse_layout(args.layout);
  if (!layout) throw UsageError(fmt::format("--layout {}: expected bhsd or bshd", args.layout));
  shape.layout = *layout;
  if (backward) shape.pass = Pass::bwd;
  const std::vector<int64_t> o_shape = output_shape(q.shape.size(), shape, shape.d_v);
  const NpyTensor dout = backward ? load_input("dO", args.dout_path) : NpyTensor{};
  if (backward) require_output_shape(dout, args.dout_path, o_shape);
  const bool with_weights = !args.weights_path.empty();
  if (const std::string reason = unsupported_reason(registered.info, shape, with_weights);
      !reason.empty()) {
    throw UsageError(reason);
  }
  auto executor = make_executor(registered.info.device);
  auto variant = registered.make();
  const std::size_t workspace = variant->workspace_bytes(shape);
  require_attend_memory(shape, registered.info, workspace, with_weights);
  allocating(fmt::format("allocating {}'s workspace", registered.info.name),
             static_cast<double>(workspace),
             [&] { variant->prepare(shape, executor->workspace()); });

  const double input_bytes = fp32_bytes(static_cast<double>(
      shape.q_elements() + shape.k_elements() + shape.v_elements() + dout.data.size()));
  HostTensors inputs = allocating("copying the inputs", input_bytes, [&] {
    Shape contiguous = shape;
    contiguous.kv_cache = KvCacheSpec::contiguous();
    HostTensors files;
    files.shape = contiguous;
    files.q = q.data;
    files.k = k.data;
    files.v = v.data;
    files.dout = dout.data;
    // Laid out in pages before the call: the output is the files' attention whatever the layout.
    if (shape.kv_cache.is_paged()) {
      files.shape = shape;
      lay_out_paged(files, 0);
    }
    return files;
  });
  if (shape.dtype != q.stored || (backward && shape.dtype != dout.stored)) {
    for (std::vector<float>* tensor : {&inputs.q, &inputs.k, &inputs.v, &inputs.dout})
      for (float& value : *tensor) value = round_to(shape.dtype, value);
  }
  // Quantized from the values the case's dtype holds, as a sweep's inputs are (inputs.cpp).
  quantize_kv_cache(inputs);
  const double weight_bytes = with_weights ? fp32_weights_bytes(shape) : 0.0;
  allocating(fmt::format("allocating the inputs and the output at {}{}", to_string(shape.dtype),
                         with_weights ? " and the weights" : ""),
             input_bytes + fp32_bytes(static_cast<double>(shape.o_elements())) + weight_bytes, [&] {
               executor->load(inputs, with_weights);
               executor->poison_outputs();
             });
  allocating(fmt::format("in {}'s run", registered.info.name), 0.0, [&] {
    executor->timed_run_ms(*variant, executor->problem(args.scale ? scale : default_scale(shape)));
  });
  NpyTensor o, weights, dq, dk, dv;
  allocating(fmt::format("fetching the output{}", with_weights ? " and the weights" : ""),
             fp32_bytes(static_cast<double>(shape.o_elements())) + weight_bytes,
             [&] { executor->fetch_outputs(o.data, with_weights ? &weights.data : nullptr); });
  require_finite_result(o.data, "the output", q, k, v);
  o.shape = o_shape;
  std::vector<std::pair<std::string, const NpyTensor*>> outputs;
  if (!args.out_path.empty()) outputs.emplace_back(args.out_path, &o);
  if (with_weights) {
    weights.shape = output_shape(q.shape.size(), shape, shape.seq_kv);
    outputs.emplace_back(args.weights_path, &weights);
  }
  std::vector<std::string> notes;
  if (backward) {
    allocating("fetching the gradients", input_bytes,
               [&] { executor->fetch_gradients(dq.data, dk.data, dv.data); });
    for (auto [gradient, name, file, path] :
         {std::tuple{&dq, "dQ", &q, &args.dq_path}, std::tuple{&dk, "dK", &k, &args.dk_path},
          std::tuple{&dv, "dV", &v, &args.dv_path}}) {
      require_finite_result(gradient->data, name, q, k, v, &dout);
      gradient->shape = file->shape;
      // float16 gradients for float16 inputs (where float16 holds them), else float32
      if (std::string note = store_gradient(*gradient, name, q.stored); !note.empty())
        notes.push_back(std::move(note));
      outputs.emplace_back(*path, gradient);
    }
  }
  // All written in full before any is renamed into place: a full disk while the weights (or a
  // gradient) are written leaves the old O too.
  save_npy_files(outputs);
  std::vector<std::string> written;
  for (const auto& [path, tensor] : outputs) written.push_back(path);
  if (is_quantized(shape.kv_dtype))
    notes.insert(notes.begin(), fmt::format("K and V quantized to {}", to_string(shape.kv_dtype)));
  if (shape.dtype != q.stored)
    notes.insert(notes.begin(),
                 fmt::format("float32 inputs rounded to {} on load", to_string(shape.dtype)));
  fmt::print("{}{}: {} -> {}{}\n", registered.info.name, backward ? " (forward and backward)" : "",
             describe(shape), fmt::join(written, ", "),
             notes.empty() ? "" : fmt::format(" ({})", fmt::join(notes, "; ")));
}

}  // namespace

void add_attend_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<AttendArguments>();
  CLI::App* attend =
      app.add_subcommand("attend", "Run one variant on your own Q, K, V (.npy, float32)");
  add_attend_options(attend, *args);
  attend->callback([args, &exit_code] {
    attend_files(*args);
    exit_code = 0;
  });
}

}  // namespace attnbench
