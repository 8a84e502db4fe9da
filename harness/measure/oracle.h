// The correctness oracle: a float64 reference and the comparison every variant must pass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/core/dtype.h"
#include "harness/core/host_tensors.h"
#include "harness/core/oracle_options.h"
#include "harness/core/oracle_report.h"
#include "harness/core/tolerance.h"

namespace attnbench {

// One row of the float64 reference: o = softmax(modified(scale * K q) + mask) V for query
// (b, h, row), written like the math, with the shape's mask and score modifiers (soft-capping,
// then ALiBi: the order mask.h gives). `weights` (seq_kv values) and `max_abs_score` may be null.
void reference_row(const HostTensors& inputs, double scale, int64_t batch, int64_t head,
                   int64_t row, std::vector<double>& o, std::vector<double>* weights,
                   double* max_abs_score = nullptr);

// The whole reference output [batch, heads, seq_q, d_v] (and weights when asked), in float64.
std::vector<double> reference_output(const HostTensors& inputs, double scale,
                                     std::vector<double>* weights = nullptr);

// A quantized cache's own error (kv_quant.h), whatever the kernel: the relative L2 distance,
// ||O(dequantized K, V) - O(K, V)|| / ||O(K, V)||, of the float64 references on the dequantized
// inputs (in.k, in.v) and on the values drawn before quantizing (in.quantized.k_exact,
// in.quantized.v_exact), over the rows the oracle checks (rows_to_check: all of a small shape's,
// sampled beyond options.full_check_max_n). For a shape whose kv_dtype is quantized.
double kv_quant_error(const HostTensors& inputs, double scale, const OracleOptions& options);

// Compares a variant's output (and weights, when given) with the reference. `o` is fp32 in bhsd
// order whatever the problem's dtype and layout (the executor unpacks it); the tolerance follows
// inputs.shape.dtype and `precision`.
OracleReport check_against_reference(const HostTensors& inputs, double scale,
                                     const std::vector<float>& o, const std::vector<float>* weights,
                                     Precision precision, const OracleOptions& options);

// The memory the oracle's threads hold at once beside the inputs, for the harness's memory
// check: per thread, a block of K or V rows widened to float64 (about 1 MiB, or one row of a
// wider d), the row's scores, weights and output in float64, and for a backward pass each
// thread's float64 dK and dV of a key head. An estimate from the largest buffers: before it, a
// d_v of 2e7 passed the check and ended out of memory.
double oracle_scratch_bytes(const Shape& shape);

}  // namespace attnbench
