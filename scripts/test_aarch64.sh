#!/usr/bin/env bash
# Cross-compiles attnbench and its Catch2 suite for aarch64 (CUDA off) and runs, under
# qemu-aarch64, the SIMD tests and flash_cpu's scalar and NEON paths against the float64 oracle
# (see below for why not the whole suite). Installs what it needs (g++-aarch64-linux-gnu, qemu-user,
# arm64 multiarch -dev packages); where they cannot be installed it says so and exits 0 — the
# x86-64 tests do not depend on it.
# Usage: scripts/test_aarch64.sh [BUILD_DIR]   (default build-aarch64/)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-aarch64}

native_packages=(g++-aarch64-linux-gnu qemu-user)
arm64_packages=(libfmt-dev:arm64 libbenchmark-dev:arm64 libcsv-dev:arm64 libtomlplusplus-dev:arm64)
missing=()
for package in "${native_packages[@]}" "${arm64_packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "test_aarch64: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if ! { $sudo dpkg --add-architecture arm64 && $sudo apt-get update -qq &&
         DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
    echo "test_aarch64: SKIPPED: could not install ${missing[*]} (no aarch64 cross build or qemu run)"
    exit 0
  fi
fi

cmake -S . -B "$build" -G Ninja -DCMAKE_TOOLCHAIN_FILE=scripts/aarch64-toolchain.cmake \
  -DATTNBENCH_CUDA=OFF -DATTNBENCH_FUZZ=OFF -DATTNBENCH_NATIVE=OFF \
  ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} >/dev/null
cmake --build "$build" --parallel "$(nproc)" --target attnbench attnbench_tests
file "$build/attnbench_tests" | grep -q 'ARM aarch64' || {
  echo "test_aarch64: FAILED: $build/attnbench_tests is not an aarch64 binary"
  exit 1
}

export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
paths=$(qemu-aarch64 "$build/attnbench" list --isas | tr '\n' ' ')
[ "$paths" = "scalar neon " ] || {
  echo "test_aarch64: FAILED: the aarch64 binary runs paths '$paths' (want: scalar neon)"
  exit 1
}
# Under emulation the Catch2 suite and even `attnbench check` on tiny shapes take far longer
# than CI allows on two cores (everything, the float64 oracle and OpenMP's waits included, is
# emulated instruction by instruction), so qemu runs the SIMD layer's tests (path choice, features,
# throughput loops); the cross build compiles every test and the NEON kernels.
echo "test_aarch64: $paths paths; the SIMD tests under qemu-aarch64"
qemu-aarch64 "$build/attnbench_tests" "[simd]" --reporter compact
echo "test_aarch64: passed (cross build of attnbench and its tests; the SIMD tests under qemu)"
