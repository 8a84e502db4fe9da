#!/usr/bin/env bash
# Installs what attnbench needs (Debian packages, Python packages) and builds it into build/.
# Safe to run again: it installs only what is missing and rebuilds incrementally. The CUDA
# variants are built when nvcc is found (in PATH or /usr/local/cuda).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ catch2 libeigen3-dev libfmt-dev libbenchmark-dev libtomlplusplus-dev
          libcli11-dev nlohmann-json3-dev libopenblas-dev libcsv-dev python3-pip
          slurm-wlm munge  # the tests start a one-node Slurm for `attnbench slurm`
          clang libclang-rt-dev  # clang and libFuzzer: the fuzz tests
          chromium chromium-driver)  # a real browser for the HTML report's test (with selenium)
missing=()
for package in "${packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

pip_install() {  # a Debian python3 marked externally managed refuses without --break-system-packages
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore "$@" 2>/dev/null ||
    python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --break-system-packages "$@"
}
pip_install -r scripts/requirements.txt
# The Python side (attnbench.results, attnbench-plot, attnbench-compare, ...), editable: it
# runs this checkout's python/attnbench.
pip_install -e python

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
cmake -S . -B build -G Ninja ${ATTNBENCH_CMAKE_ARGS:-} >/dev/null
cmake --build build --parallel "$(nproc)"
