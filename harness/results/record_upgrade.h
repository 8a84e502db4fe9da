// Records as the current schema reads them, whatever release wrote them: the one place that knows
// what an older record left out. A reader upgrades a stored record, then rates it (rate_record);
// the file keeps the bytes it was written with.
#pragma once

#include <nlohmann/json.hpp>

namespace attnbench {

// `stored` with every field an older release did not write filled in as that release meant it:
// dtype fp32, layout bhsd and pass fwd (before typed tensors and the pass axis); the mask its
// causal flag says (before the mask axis); K and V in the case's dtype, a contiguous cache, no
// ragged lengths and no quantization error (before the serving axes); one pass per timed sample
// (before sampled runs); null for what was not counted then (bytes moved, arithmetic intensity,
// saved-for-backward bytes); `isa` under its present name, `code_path`. A current record comes
// back unchanged.
nlohmann::ordered_json upgrade_record(const nlohmann::ordered_json& stored);

}  // namespace attnbench
