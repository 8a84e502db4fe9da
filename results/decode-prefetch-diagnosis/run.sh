#!/bin/bash
# decode-prefetch-diagnosis: one build with diagnostic.patch applied ($1), run in rounds over the
# software prefetch settings, each a cold run of issue 35's decode at 128K keys, contiguous.
#   bash results/decode-prefetch-diagnosis/run.sh <patched attnbench> results/decode-prefetch-diagnosis/runs
set -euo pipefail
binary=$1 out=$2
settings=("1 2" "0 2" "2 2" "8 2" "1 1" "1 4" "1 8")  # lines per request (0: none), tiles ahead
for round in 1 2 3; do
  for setting in "${settings[@]}"; do
    read -r every tiles <<<"$setting"
    ATTNBENCH_DIAG_PREFETCH_EVERY=$every ATTNBENCH_DIAG_PREFETCH_TILES=$tiles "$binary" run \
      configs/decode-paged-ab.toml --set 'axes.kv_lens=["131072"]' \
      --set 'axes.kv_cache=["contiguous"]' --set 'axes.kv_dtype=["dtype","int8"]' \
      --out "$out/every$every-tiles$tiles-round$round" >/dev/null
  done
done
