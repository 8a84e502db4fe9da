// Quantizes a case's K and V once, after they are drawn (and laid out in pages): the codes and
// scales a variant reads, and the dequantized values the oracle reads (kv_quant.h).
#pragma once

#include <cstdint>
#include <vector>

#include "harness/core/host_tensors.h"

namespace attnbench {

// For a shape whose kv_dtype is quantized: fills inputs.quantized.k_codes, v_codes, k_scales,
// v_scales and k_exact, v_exact (host_tensors.h) and replaces k and v by code * scale. Nothing
// changes for an unquantized shape.
void quantize_kv_cache(HostTensors& inputs);

// One quantized tensor: `rows` rows of `dim` values quantized to int8, one scale per row
// (scale = max |x| / 127; 0 for an all-zero row). Writes the codes and scales and replaces each
// value by code * scale.
void quantize_rows_int8(std::vector<float>& values, int64_t rows, int64_t dim,
                        std::vector<uint8_t>& codes, std::vector<float>& scales);

}  // namespace attnbench
