#!/usr/bin/env bash
# The README's first command: set up, build, run the default sweep (configs/quick.toml) into a
# new folder results/quick-<UTC time> (or $1), and draw its plots. Never touches earlier runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
out="${1:-results/quick-$(date -u +%Y%m%d-%H%M%S)}"
./build/attnbench run configs/quick.toml --out "$out"
python3 -m attnbench plot "$out"   # = attnbench-plot "$out"
echo "quickstart: results and plots in $out"
