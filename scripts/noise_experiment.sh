#!/usr/bin/env bash
# The noise experiment of docs/methodology.md ("Numbers on a busy machine"): the time ratio
# flash_cpu / openmp of configs/noise.toml measured four ways, each into its own results folder:
#
#   noise-quiet-separate       the machine as quiet as it gets, the variants timed one after the other
#   noise-quiet-interleaved    the same, the variants alternating in rounds (measure.interleave)
#   noise-loaded-separate      with a busy loop on one core, one after the other
#   noise-loaded-interleaved   with the busy loop, alternating in rounds
#
# then the ratio table and plot (attnbench-compare-variants) into noise-ratios/, and the load
# average before each part into noise-ratios/conditions.txt. The committed run, and what it
# shows, is results/noise-ratios/README.md.
#
#   bash scripts/noise_experiment.sh [RESULTS_DIR]      # default: results
#
# Before each quiet part it waits (up to QUIET_WAIT_S, default 300 s) for the 1-minute load
# average to drop below 0.5, and says so when it never does. About 3-5 minutes in all.
set -euo pipefail
cd "$(dirname "$0")/.."

binary=${ATTNBENCH_BINARY:-build/attnbench}
results=${1:-results}
config=configs/noise.toml
quiet_wait_s=${QUIET_WAIT_S:-300}
conditions="$results/noise-ratios/conditions.txt"

for part in quiet-separate quiet-interleaved loaded-separate loaded-interleaved ratios; do
  if [ -e "$results/noise-$part" ]; then
    echo "noise_experiment.sh: $results/noise-$part already exists; move it away first" >&2
    exit 2
  fi
done
mkdir -p "$results/noise-ratios"

load_1min() { cut -d' ' -f1 /proc/loadavg; }

# Waits for the load average to drop below 0.5 (other work finished); notes what it found.
wait_for_quiet() {
  local part=$1 waited=0
  while awk -v load="$(load_1min)" 'BEGIN { exit !(load >= 0.5) }'; do
    if [ "$waited" -ge "$quiet_wait_s" ]; then
      echo "$part: load average still $(load_1min) after ${waited}s: run anyway, NOT quiet" |
        tee -a "$conditions"
      return
    fi
    sleep 10
    waited=$((waited + 10))
  done
  echo "$part: load average $(load_1min) (waited ${waited}s)" | tee -a "$conditions"
}

run_part() {
  local part=$1
  shift
  echo "== $part"
  "$binary" run "$config" --out "$results/noise-$part" "$@"
}

wait_for_quiet quiet-separate
run_part quiet-separate
wait_for_quiet quiet-interleaved
run_part quiet-interleaved --set measure.interleave=true

# One busy loop, pinned to this process's first CPU; bounded, and killed on any exit.
core=$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')
timeout 900 taskset -c "$core" sh -c 'while :; do :; done' &
busy_loop=$!
trap 'kill $busy_loop 2>/dev/null || true' EXIT
sleep 2
echo "loaded: busy loop (pid $busy_loop) on CPU $core; load average $(load_1min)" |
  tee -a "$conditions"
run_part loaded-separate
run_part loaded-interleaved --set measure.interleave=true
kill "$busy_loop"
wait "$busy_loop" 2>/dev/null || true

python3 -m attnbench compare-variants "$results/noise-quiet-separate" \
  "$results/noise-quiet-interleaved" "$results/noise-loaded-separate" \
  "$results/noise-loaded-interleaved" --baseline openmp --out "$results/noise-ratios"
