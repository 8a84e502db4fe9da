#!/usr/bin/env bash
# Cross-compiles attnbench and its Catch2 suite for aarch64 (CUDA off) and runs the suite under
# qemu-aarch64: the SIMD layer, every CPU variant against the float64 oracle, flash_cpu on its
# scalar and NEON paths, the harness. Installs what it needs (g++-aarch64-linux-gnu, qemu-user;
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
# The Catch2 suite, emulated: ~10x the native time (the float64 oracle and every variant
# run instruction by instruction). OpenMP's idle threads sleep instead of spinning, which under
# emulation would take the cores the working threads need.
# The sweeps over every variant run only flash_cpu's section here (its scalar and NEON paths are
# what differs on aarch64); naive, blas and the example in them, and the float64 oracle's own
# sampling check, are plain C++ the x86-64 suite runs in full, and under emulation they were more
# than half the suite's time.
echo "test_aarch64: $paths paths; the Catch2 suite under qemu-aarch64"
log="$build/qemu-tests.log"
every_variant=("every variant with a backward matches the backward oracle on every edge shape"
               "every variant with a backward matches the backward oracle on every mask and modifier"
               "every variant matches the oracle on every edge shape and distribution"
               "every variant matches the oracle on every mask and score modifier it declares")
other_tests=("~variants that return weights return correct weights"
             "~above full_check_max_n the oracle checks the first and last row of every head")
for name in "${every_variant[@]}"; do other_tests+=("~$name"); done
run_suite() {
  OMP_WAIT_POLICY=passive qemu-aarch64 "$build/attnbench_tests" --reporter compact "$@" >>"$log" 2>&1
}
: >"$log"
if ! run_suite "${other_tests[@]}" || ! run_suite "$(IFS=,; echo "${every_variant[*]}")" -c flash_cpu; then
  grep -v "warning: 'SKIPPED" "$log" | tail -100
  echo "test_aarch64: FAILED: the Catch2 suite under qemu-aarch64 (full log: $log)"
  exit 1
fi
# A variant skipping a dtype, layout or feature it does not declare is expected (hundreds of
# lines); any other skip is shown.
grep "warning: 'SKIPPED" "$log" | grep -v "does not take\|does not support\|does not return" || true
echo "test_aarch64: $(grep -c "warning: 'SKIPPED" "$log") checks skipped (full log: $log)"
{ grep -E "^(Passed|Failed)" "$log" || true; } | tail -1  # Catch2's summary
echo "test_aarch64: passed (cross build; the Catch2 suite under qemu-aarch64, on the scalar and NEON paths)"
