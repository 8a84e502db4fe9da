#!/usr/bin/env bash
# Builds attnbench for targets other than this machine and checks what it builds, so that a build
# on any CPU this project claims compiles and runs only what that CPU has (docs/cpu-paths.md):
#   1. g++, -DATTNBENCH_NATIVE=OFF (plain x86-64: every SIMD path gets only the extensions its
#      CMake line names, so a path that uses one it does not name fails to compile here, on any
#      host), then `attnbench check configs/portability.toml` on every flash_cpu path this CPU
#      runs, forced one at a time;
#   2. clang++, -march=x86-64-v3 (the AVX2 machines' baseline; clang checks every intrinsic's
#      target features itself): the whole binary, checked as in 1.
# CUDA, tests and fuzzing are off in these builds (scripts/test.sh covers them natively).
# Usage: scripts/test_portability.sh [WORK_DIR]   (default build-portability/)
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-build-portability}
if [ "$(uname -m)" != x86_64 ]; then
  echo "portability: skipped: these are x86-64 builds and this host is $(uname -m)"
  exit 0
fi
mkdir -p "$work"
common=(-G Ninja -DATTNBENCH_CUDA=OFF -DATTNBENCH_TESTS=OFF -DATTNBENCH_FUZZ=OFF)
[ -n "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ] && common+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$CMAKE_CXX_COMPILER_LAUNCHER")

# Every flash_cpu path this CPU runs, by name (the binary's own list: `attnbench list --isas`).
check_every_path() {
  local binary=$1 label=$2
  local isas
  isas=$("$binary" list --isas)
  for isa in $isas; do
    echo "portability: $label: attnbench check configs/portability.toml, flash_cpu on $isa"
    ATTNBENCH_FLASH_CPU_ISA=$isa "$binary" check configs/portability.toml --variants flash_cpu \
      > "$work/check-$label-$isa.log" 2>&1 || {
      tail -20 "$work/check-$label-$isa.log"
      echo "portability: FAILED: $label build, flash_cpu on $isa (log: $work/check-$label-$isa.log)"
      exit 1
    }
  done
}

echo "portability: [1/2] g++, plain x86-64 (ATTNBENCH_NATIVE=OFF)"
cmake -S . -B "$work/gcc-baseline" "${common[@]}" -DATTNBENCH_NATIVE=OFF -DCMAKE_CXX_COMPILER=g++ >/dev/null
cmake --build "$work/gcc-baseline" --parallel "$(nproc)" --target attnbench
check_every_path "$work/gcc-baseline/attnbench" gcc-baseline

echo "portability: [2/2] clang++, -march=x86-64-v3 (AVX2 machines)"
clang=$(command -v clang++ || command -v clang++-16 || command -v clang++-14 || true)
if [ -z "$clang" ]; then
  echo "portability: FAILED: no clang++ (scripts/setup.sh installs it)"
  exit 1
fi
cmake -S . -B "$work/clang-x86-64-v3" "${common[@]}" -DATTNBENCH_NATIVE=OFF \
  -DCMAKE_CXX_COMPILER="$clang" -DCMAKE_CXX_FLAGS=-march=x86-64-v3 >/dev/null
cmake --build "$work/clang-x86-64-v3" --parallel "$(nproc)" --target attnbench
check_every_path "$work/clang-x86-64-v3/attnbench" clang-x86-64-v3

echo "portability: passed: g++ (plain x86-64) and clang++ (x86-64-v3) builds; flash_cpu paths checked: $("$work/gcc-baseline/attnbench" list --isas | tr '\n' ' ')"
