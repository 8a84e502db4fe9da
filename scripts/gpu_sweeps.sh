# The GPU run's sweeps (scripts/gpu_run.sh): which configs it runs, in order of what matters most,
# and the arguments that reduce each to what fits the GPU machine's deadline. Sourced by
# gpu_run.sh, which plans every sweep (in a dry run too) before it runs any, and by
# tests/python/test_gpu_sweeps.py, which plans them on a CPU build: a config or an argument the
# binary refuses is found in CI, not after the GPU time is spent.
#
# The harness draws each case's inputs on one CPU thread (about 40 M values/s), twice a case, and
# its float64 oracle checks whole outputs on one thread (2 s for 16 heads of 1024 rows, d 128), so
# the configs as written (fa-shapes and decode-gpu: 100 M to 1 G values a case) do not fit the
# default deadline. Unless ATTNBENCH_GPU_FULL=1, each runs a reduced, stated subset, with fewer
# repetitions and sampled-row oracle checks above n = 512 (ctest and the edge check above compare
# every row). ATTNBENCH_GPU_<NAME>_ARGS replaces a sweep's reduction.
# shellcheck shell=bash

# shellcheck disable=SC2034  # read by the scripts that source this file
gpu_sweeps=(gpu-scaling fa-shapes decode-gpu gpu-masks)

# gpu_sweep_args NAME: sets the array `sweep_args` to NAME's `attnbench run` arguments.
gpu_sweep_args() {
  local measure_set=(--set measure.warmup=2 --set measure.repetitions=3 --set measure.min_time_s=0.05
                     --set oracle.full_check_max_n=512)
  sweep_args=()
  [[ "${ATTNBENCH_GPU_FULL:-0}" == 1 ]] && return 0
  # shellcheck disable=SC2206  # word splitting of the user's arguments is intended
  case $1 in
    gpu-scaling) sweep_args=(${ATTNBENCH_GPU_SCALING_ARGS:---set axes.causal=[false]}) ;;
    fa-shapes)
      sweep_args=(${ATTNBENCH_GPU_FA_ARGS:---variants fused,flash_tc,cublas --set axes.seq_len=[1024,4096,16384] --set axes.d_k=[128]}) ;;
    decode-gpu)
      sweep_args=(${ATTNBENCH_GPU_DECODE_ARGS:---variants chunked_cuda,fused --set axes.seq_kv=[4096,32768]}) ;;
    gpu-masks) sweep_args=(${ATTNBENCH_GPU_MASKS_ARGS:---variants fused,flash_tc}) ;;
    *) echo "gpu_sweeps.sh: no sweep named '$1'" >&2; return 2 ;;
  esac
  sweep_args+=("${measure_set[@]}")
}
