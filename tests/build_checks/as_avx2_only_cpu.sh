#!/usr/bin/env bash
# The flash_cpu and SIMD tests, and `attnbench check` on odd shapes, as an AVX2-only CPU (AMD Zen 3)
# runs them, on whatever x86-64 host this is: ATTNBENCH_CPU_FEATURES=avx2 shows the process only
# AVX2, FMA and F16C, so the path choice, the peak loops and every test that forces an AVX-512 path
# see what that CPU would (the AVX-512 tests must skip, saying so, not fail or fault).
# Usage: as_avx2_only_cpu.sh BUILD_DIR
set -euo pipefail
build_dir=${1:?usage: as_avx2_only_cpu.sh BUILD_DIR}
export ATTNBENCH_CPU_FEATURES=avx2
if ! paths=$("$build_dir/attnbench" list --isas 2>&1); then
  echo "as_avx2_only_cpu: SKIPPED: this CPU cannot run the AVX2 path ($paths)"
  exit 0
fi
[ "$(echo $paths)" = "scalar avx2" ] || {
  echo "as_avx2_only_cpu: FAILED: paths seen as an AVX2-only CPU: $(echo $paths) (want: scalar avx2)"
  exit 1
}
"$build_dir/attnbench_tests" "[flash_cpu],[simd]" --reporter compact
log="$build_dir/as_avx2_only_cpu.check.log"
"$build_dir/attnbench" check configs/portability.toml --variants flash_cpu > "$log" 2>&1 || {
  tail -20 "$log"
  echo "as_avx2_only_cpu: FAILED: attnbench check configs/portability.toml (log: $log)"
  exit 1
}
echo "as_avx2_only_cpu: passed (flash_cpu on: $(echo $paths))"
