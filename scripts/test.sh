#!/usr/bin/env bash
# The README's second command: set up, build, and run every test (Catch2 unit and oracle tests,
# end-to-end tests of the binary, and the plot scripts' pytest suite) through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ctest --test-dir build --output-on-failure --timeout 1800 -j "$(nproc)"
