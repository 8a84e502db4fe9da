// The documents mask's start rows on the device, for the fused kernels' mask_math::DeviceMask:
// copied once in a variant's prepare(), outside the timed run, into memory its workspace owns.
#pragma once

#include "harness/core/mask.h"
#include "harness/variant/workspace.h"

namespace attnbench {

// mask_math::document_starts(mask) in `workspace` (device memory), or null when the mask is not
// documents. Takes mask_math::document_starts_bytes(mask) bytes.
const int* upload_document_starts(const MaskSpec& mask, Workspace& workspace);

}  // namespace attnbench
