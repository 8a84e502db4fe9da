// attnbench attend: one variant on the user's own tensors from .npy files. float16 files run in
// fp16; float32 files in fp32, or rounded once on load to --dtype bf16 / fp16 (the .npy format has
// no bf16). O (and the weights) are written as float32. With --backward (dO given) the variant's
// forward runs, then its backward, and dQ, dK, dV are written: float32, or float16 for float16
// inputs.
#include <fmt/format.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "harness/cli/commands.h"
#include "harness/cli/decimal_argument.h"
#include "harness/core/kv_quant.h"
#include "harness/core/pass.h"
#include "harness/plan/axis_flags.h"
#include "harness/results/npy_io.h"
#include "harness/results/npy_problem.h"
#include "harness/results/npy_values.h"
#include "harness/results/output_files.h"
#include "harness/runner/npy_attention.h"
#include "harness/variant/registry.h"

namespace attnbench {

namespace {

struct AttendArguments {
  std::string variant;
  std::string q_path, k_path, v_path, out_path, weights_path;
  NpyProblemFlags problem;  // the mask, modifiers, dtype, layout and KV cache flags
  std::map<std::string, bool> axis_switches;  // the axes table's switches (--alibi), by flag
  std::vector<std::string> doc_lens;  // --doc-lens as typed: decimal_list's, read into `problem`
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

// A flag for each axis of the axes table that attend takes, its value kept as given for
// with_axis_flags() to read as the config reads the key. A switch (--alibi) is bound to a bool,
// so CLI11 reads --alibi=false as it reads any flag; switches_given() passes it on.
void add_axis_flags(CLI::App* attend, AttendArguments& args) {
  for (const AxisDefinition& axis : axis_definitions()) {
    if (axis.attend_flag == nullptr) continue;
    const std::string flag = axis.attend_flag;
    if (is_switch(axis)) {
      attend->add_flag(flag, args.axis_switches[flag],
                       fmt::format("For the call: {}", axis.key.meaning));
    } else {
      std::map<std::string, std::string>& given = args.problem.axis_flags;
      attend->add_option_function<std::string>(
          flag, [&given, flag](const std::string& text) { given[flag] = text; },
          fmt::format("For the call: {} ({})", axis.key.meaning, axis.key.allowed));
    }
  }
}

// The switches given on the command line, as "true" or "false", beside the other axis flags.
void switches_given(const CLI::App& attend, AttendArguments& args) {
  for (const auto& [flag, value] : args.axis_switches)
    if (attend.count(flag) > 0) args.problem.axis_flags[flag] = value ? "true" : "false";
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
      ->add_option("--doc-lens", args.doc_lens,
                   "Document lengths for --mask documents, summing to seq: e.g. 3,5,8")
      ->check(decimal_list("document length"));
  attend->add_option("--scale", args.scale, "Score scale (default 1/sqrt(d_k))");
  attend->add_option("--out", args.out_path,
                     "Where to write O (.npy); required unless the backward runs");
  attend->add_option("--weights", args.weights_path, "Also write the attention weights (.npy)");
  attend->add_option("--dtype", args.problem.dtype,
                     "Run in fp32, bf16 or fp16: float32 inputs are rounded to it once on load "
                     "(default: the files' type; float16 files run in fp16)");
  attend->add_option("--kv-lens", args.problem.kv_lens,
                     "A ragged batch: each sequence's cache length, e.g. 5,300,2 (the longest "
                     "is K's seq; sequence b reads its first kv_lens[b] keys)");
  attend->add_flag("--backward", args.backward,
                   "Also run the variant's backward: reads --dout, writes --dq, --dk, --dv");
  attend->add_option("--dout", args.dout_path, "dO, the gradient of O (.npy): O's shape");
  attend->add_option("--dq", args.dq_path, "Where to write dQ (.npy, Q's shape)");
  attend->add_option("--dk", args.dk_path, "Where to write dK (.npy, K's shape)");
  attend->add_option("--dv", args.dv_path, "Where to write dV (.npy, V's shape)");
  add_axis_flags(attend, args);
  attend->footer(
      "The files are always [batch, heads, seq, d]: under --layout bshd the inputs are stored "
      "[batch, seq, heads, d] for the variant, and the outputs written back as the files are.");
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

// The problem's shape from Q's, K's and V's headers (its pass bwd with the backward), their
// data not read.
Shape problem_from_headers(const AttendArguments& args, bool backward) {
  Shape shape = npy_problem_shape(load_npy_header(args.q_path), load_npy_header(args.k_path),
                                  load_npy_header(args.v_path), args.problem);
  if (backward) shape.pass = Pass::bwd;
  return shape;
}

// Q, K and V read and their problem's shape (its pass bwd with the backward); then dO, which
// must have O's shape.
Shape load_inputs(const AttendArguments& args, bool backward, NpyAttentionInputs& inputs) {
  inputs.q = load_finite_input("Q", args.q_path);
  inputs.k = load_finite_input("K", args.k_path);
  inputs.v = load_finite_input("V", args.v_path);
  Shape shape = npy_problem_shape(inputs.q, inputs.k, inputs.v, args.problem);
  if (backward) {
    shape.pass = Pass::bwd;
    inputs.dout = load_finite_input("dO", args.dout_path);
    require_output_shape(inputs.dout, args.dout_path,
                         output_shape(inputs.q.shape.size(), shape, shape.d_v));
  }
  return shape;
}

// Writes the results the flags name, then the summary line. A float16 input's gradients are
// written in float16 where float16 holds them, else float32.
void write_results(const AttendArguments& args, const VariantInfo& variant, const Shape& shape,
                   DType inputs_stored, NpyAttentionResults& results) {
  const bool backward = needs_backward(shape.pass);
  std::vector<std::pair<std::string, const NpyTensor*>> outputs;
  if (!args.out_path.empty()) outputs.emplace_back(args.out_path, &results.o);
  if (!args.weights_path.empty()) outputs.emplace_back(args.weights_path, &results.weights);
  std::vector<std::string> notes;
  if (backward) {
    for (auto [gradient, name, path] : {std::tuple{&results.dq, "dQ", &args.dq_path},
                                        std::tuple{&results.dk, "dK", &args.dk_path},
                                        std::tuple{&results.dv, "dV", &args.dv_path}}) {
      if (std::string note = store_gradient(*gradient, name, inputs_stored); !note.empty())
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
  if (shape.dtype != inputs_stored)
    notes.insert(notes.begin(),
                 fmt::format("float32 inputs rounded to {} on load", to_string(shape.dtype)));
  fmt::print("{}{}: {} -> {}{}\n", variant.name, backward ? " (forward and backward)" : "",
             describe(shape), fmt::join(written, ", "),
             notes.empty() ? "" : fmt::format(" ({})", fmt::join(notes, "; ")));
}

// Checks the output files, loads the inputs, runs the variant once (its forward, then its
// backward when asked), checks the results are finite and writes them as .npy files.
void attend_files(const AttendArguments& args) {
  const RegisteredVariant& registered = registered_variant(args.variant);
  const bool backward = backward_requested(args);
  require_distinct_outputs("attend", output_files(args), input_files(args));
  require_regular_outputs(output_files(args));
  const std::optional<float> scale =
      args.scale ? std::optional<float>(checked_scale(*args.scale)) : std::nullopt;
  const bool with_weights = !args.weights_path.empty();
  require_npy_attention_fits(registered, problem_from_headers(args, backward), with_weights);
  NpyAttentionInputs inputs;
  const Shape shape = load_inputs(args, backward, inputs);
  NpyAttentionResults results = run_npy_attention(registered, shape, inputs, scale, with_weights);
  write_results(args, registered.info, shape, inputs.q.stored, results);
}

}  // namespace

void add_attend_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<AttendArguments>();
  CLI::App* attend =
      app.add_subcommand("attend", "Run one variant on your own Q, K, V (.npy, float32)");
  add_attend_options(attend, *args);
  attend->callback([args, attend, &exit_code] {
    switches_given(*attend, *args);
    args->problem.doc_lens = decimal_list_values(args->doc_lens);
    attend_files(*args);
    exit_code = 0;
  });
}

}  // namespace attnbench
