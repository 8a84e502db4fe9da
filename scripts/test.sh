#!/usr/bin/env bash
# The README's second command: set up, build, and run the tests through ctest, one test per core at a time.
#   bash scripts/test.sh          every tier but `slow` and `fuzz`: minutes, for a change in hand
#   bash scripts/test.sh --all    every test (CI runs the default, then --all -L '^(slow|fuzz)$')
#   bash scripts/test.sh -L cli   any other ctest arguments pass through (a tier: unit, oracle,
#                                 cli, python, build, slow, fuzz; -R a name pattern)
set -euo pipefail
cd "$(dirname "$0")/.."
tiers=(-LE '^(slow|fuzz)$')
passthrough=()
for argument in "$@"; do
  case "$argument" in
    --all) tiers=() ;;
    -h | --help) sed -n '2,6s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) passthrough+=("$argument") ;;
  esac
done
bash scripts/setup.sh
ctest --test-dir build --output-on-failure --timeout 1800 -j "$(nproc)" ${tiers[@]+"${tiers[@]}"} \
  ${passthrough[@]+"${passthrough[@]}"}
