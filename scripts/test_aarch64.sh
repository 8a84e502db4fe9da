#!/usr/bin/env bash
# Cross-compiles attnbench and its Catch2 suite for aarch64 (CUDA off) and runs, under
# qemu-aarch64, the SIMD tests and flash_cpu's scalar and NEON paths against the float64 oracle
# (see below for why not the whole suite). Installs what it needs (g++-aarch64-linux-gnu, qemu-user;
# the arm64 libraries are unpacked into BUILD_DIR/sysroot, never installed); where they cannot be
# had it says so and exits 0 — the x86-64 tests do not depend on it.
# Usage: scripts/test_aarch64.sh [BUILD_DIR]   (default build-aarch64/)
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath -m "${1:-build-aarch64}")

native_packages=(g++-aarch64-linux-gnu qemu-user)
# The arm64 libraries are unpacked into $build/sysroot, not installed: Debian's arm64 -dev
# packages of fmt, Google Benchmark, toml++ and libcsv cannot sit beside the amd64 ones, so
# installing them would remove what the native build needs.
arm64_debs=(libfmt-dev libfmt9 libbenchmark-dev libbenchmark1debian libcsv-dev libcsv3
            libtomlplusplus-dev libtomlplusplus3)
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
skip() {
  echo "test_aarch64: SKIPPED: $1 (no aarch64 cross build or qemu run)"
  exit 0
}
missing=()
for package in "${native_packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "test_aarch64: installing ${missing[*]}"
  { $sudo apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null; } ||
    skip "could not install ${missing[*]}"
fi
sysroot="$build/sysroot"
if [ ! -f "$sysroot/.unpacked" ]; then
  echo "test_aarch64: unpacking arm64 ${arm64_debs[*]} into $sysroot"
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    { $sudo dpkg --add-architecture arm64 && $sudo apt-get update -qq; } ||
      skip "could not add the arm64 package architecture"
  fi
  debs="$build/arm64-debs"
  rm -rf "$debs" "$sysroot" && mkdir -p "$debs" "$sysroot"
  (cd "$debs" && apt-get download "${arm64_debs[@]/%/:arm64}" >/dev/null 2>&1) ||
    skip "could not download arm64 ${arm64_debs[*]}"
  for deb in "$debs"/*.deb; do dpkg -x "$deb" "$sysroot"; done
  touch "$sysroot/.unpacked"
fi

cmake -S . -B "$build" -G Ninja -DCMAKE_TOOLCHAIN_FILE=scripts/aarch64-toolchain.cmake \
  -DATTNBENCH_AARCH64_SYSROOT="$sysroot" \
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
