// attnbench attend: one variant on the user's own tensors from .npy files. float16 files run in
// fp16; float32 files in fp32, or rounded once on load to --dtype bf16 / fp16 (the .npy format has
// no bf16). O (and the weights) are written as float32. With --backward (dO given) the variant's
// forward runs, then its backward, and dQ, dK, dV are written: float32, or float16 for float16
// inputs.
#include <fmt/format.h>

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
#include "harness/results/npy_problem.h"
#include "harness/results/npy_values.h"
#include "harness/results/output_files.h"
#include "harness/variant/registry.h"

namespace attnbench {

namespace {

struct AttendArguments {
  std::string variant;
  std::string q_path, k_path, v_path, out_path, weights_path;
  NpyProblemFlags problem;  // the mask, modifiers, dtype, layout and KV cache flags
  std::optional<double> scale;
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
  attend->add_flag("--causal", args.problem.causal,
                   "Causal mask, aligned to the end when seq_q < seq_kv (as --mask causal)");
  attend->add_option("--mask", args.problem.mask,
                     "Mask, aligned to the end: none, causal, window:L (L keys before the "
                     "query's own), prefix:P, documents (with --doc-lens)");
  attend
      ->add_option("--doc-lens", args.problem.doc_lens,
                   "Document lengths for --mask documents, summing to seq: e.g. 3,5,8")
      ->delimiter(',');
  attend->add_flag("--alibi", args.problem.alibi, "Add the ALiBi bias -slope_h * |p(i) - j|");
  attend->add_option("--softcap", args.problem.softcap,
                     "Soft-cap the scaled scores: s -> c * tanh(s / c) (0: off)");
  attend->add_option("--scale", args.scale, "Score scale (default 1/sqrt(d_k))");
  attend->add_option("--out", args.out_path,
                     "Where to write O (.npy); required unless the backward runs");
  attend->add_option("--weights", args.weights_path, "Also write the attention weights (.npy)");
  attend->add_option("--dtype", args.problem.dtype,
                     "Run in fp32, bf16 or fp16: float32 inputs are rounded to it once on load "
                     "(default: the files' type; float16 files run in fp16)");
  attend->add_option("--kv-cache", args.problem.kv_cache,
                     "How K and V are stored for the call: contiguous (default) or paged:P "
                     "(pages of P tokens in a seeded shuffled pool, with a block table)");
  attend->add_option("--kv-dtype", args.problem.kv_dtype,
                     "What K and V are stored in for the call: dtype (default: the case's), int8 "
                     "(a fp32 scale per token and KV head) or fp8_e4m3 (a fp32 scale per sequence "
                     "and KV head), quantized once from the files' values");
  attend->add_option("--kv-lens", args.problem.kv_lens,
                     "A ragged batch: each sequence's cache length, e.g. 5,300,2 (the longest "
                     "is K's seq; sequence b reads its first kv_lens[b] keys)");
  attend->add_flag("--backward", args.backward,
                   "Also run the variant's backward: reads --dout, writes --dq, --dk, --dv");
  attend->add_option("--dout", args.dout_path, "dO, the gradient of O (.npy): O's shape");
  attend->add_option("--dq", args.dq_path, "Where to write dQ (.npy, Q's shape)");
  attend->add_option("--dk", args.dk_path, "Where to write dK (.npy, K's shape)");
  attend->add_option("--dv", args.dv_path, "Where to write dV (.npy, V's shape)");
  attend->add_option(
      "--layout", args.problem.layout,
      "Memory layout the variant reads: bhsd (default) or bshd (the inputs are "
      "stored [batch, seq, heads, d] for it; files are always [batch, heads, seq, d])");
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

// Loads the inputs, runs the variant once (its forward, then its backward when asked), checks the
// results are finite and writes them as .npy files.
void attend_files(const AttendArguments& args) {
  const RegisteredVariant& registered = registered_variant(args.variant);
  const bool backward = backward_requested(args);
  require_distinct_outputs("attend", output_files(args), input_files(args));
  require_regular_outputs(output_files(args));
  const float scale = args.scale ? checked_scale(*args.scale) : 0.0f;
  const NpyTensor q = load_finite_input("Q", args.q_path);
  const NpyTensor k = load_finite_input("K", args.k_path);
  const NpyTensor v = load_finite_input("V", args.v_path);
  Shape shape = npy_problem_shape(q, k, v, args.problem);
  if (backward) shape.pass = Pass::bwd;
  const std::vector<int64_t> o_shape = output_shape(q.shape.size(), shape, shape.d_v);
  const NpyTensor dout = backward ? load_finite_input("dO", args.dout_path) : NpyTensor{};
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
