#!/usr/bin/env bash
# The whole GPU run as one command on a GPU machine with no network and nothing installable: it
# unpacks the Debian packages carried in .deb/ (scripts/gpu_fetch_debs.sh fetched them) into a
# private prefix under /tmp, never into /, then configures and builds for sm_90, runs ctest, the
# oracle on edge shapes, the GPU sweeps, PyTorch's SDPA on the same shapes, the plots and a
# markdown summary, and copies what is worth keeping into its output folder (OUT, below). Every
# stage has a time limit, all of them fit ATTNBENCH_GPU_DEADLINE_S, and a failed stage does not
# stop the later ones (except that nothing runs without a binary). The last thing printed is a
# short table.
#
#   on the GPU machine:     bash scripts/gpu_run.sh    (from the repository root, .deb/ beside it)
#   without a GPU (dry):    ATTNBENCH_GPU_RUN_DRY=1 bash scripts/gpu_run.sh
#
# Environment (all optional):
#   OUT                          the output folder: where logs, summary and the results
#                                archive go (default: <build dir>/out)
#   ATTNBENCH_GPU_RUN_DRY=1      stop after build, ctest and planning the sweeps (also what
#                                happens with no GPU)
#   ATTNBENCH_GPU_DEADLINE_S     seconds the whole script may take (default 510; dry 1500)
#   ATTNBENCH_GPU_BUILD_DIR      default build-gpu (build-gpu-dry in dry mode)
#   ATTNBENCH_GPU_PREFIX         where .deb/ is unpacked (default /tmp/attnbench-prefix)
#   ATTNBENCH_GPU_TAG            results folder prefix (default: from the GPU name, e.g. h200)
#   ATTNBENCH_GPU_FULL=1         run the sweep configs as written, not the reduced sweeps of
#                                scripts/gpu_sweeps.sh
#   ATTNBENCH_GPU_SCALING_ARGS, ATTNBENCH_GPU_FA_ARGS, ATTNBENCH_GPU_DECODE_ARGS,
#   ATTNBENCH_GPU_MASKS_ARGS
#                                extra `attnbench run` arguments replacing each reduced sweep's
#   ATTNBENCH_GPU_CTEST_ARGS     extra ctest arguments (default '-E python.scripts': the pytest
#                                suite is CPU-only Python, about 100 s, and CI runs it; set it
#                                to '' to run every test)
#
# Writes into the output folder (at most 8 files, flat): summary.md, results.tar.gz (every results
# folder made, with its plots), env.txt, build.log, ctest.log, edge-check.json, runs.log, stages.tsv.
# shellcheck disable=SC2317  # functions run through run_stage look unreachable to shellcheck
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
repo=$PWD

if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  awk 'NR > 1 && (!/^#( |$)/ || /^# shellcheck/) {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"
  exit 0
fi
if (($#)); then
  echo "gpu_run.sh: error: no arguments expected (see --help); settings are environment variables" >&2
  exit 2
fi

dry=${ATTNBENCH_GPU_RUN_DRY:-0}
if [[ "$dry" == 1 ]]; then
  default_build=build-gpu-dry default_deadline=1500  # no GPU time to save: a 2-core build is slow
else
  default_build=build-gpu default_deadline=510
fi
deadline=${ATTNBENCH_GPU_DEADLINE_S:-$default_deadline}
build_dir=${ATTNBENCH_GPU_BUILD_DIR:-$default_build}
prefix=${ATTNBENCH_GPU_PREFIX:-/tmp/attnbench-prefix}
out=${OUT:-$repo/$build_dir/out}
jobs=$(nproc 2>/dev/null || echo 4)
final_reserve=25  # seconds kept back for the summary, the archive and the table
# attnbench prints its table to stdout and progress to stderr: line-buffer stdout, so the two
# interleave by whole lines in a log.
line_buffered=()
command -v stdbuf >/dev/null 2>&1 && line_buffered=(stdbuf -oL)
SECONDS=0

mkdir -p "$out" || { echo "gpu_run.sh: error: cannot create $out" >&2; exit 2; }
out=$(cd "$out" && pwd)
env_log=$out/env.txt build_log=$out/build.log ctest_log=$out/ctest.log
edge_json=$out/edge-check.json runs_log=$out/runs.log stages_tsv=$out/stages.tsv
: >"$env_log"; : >"$build_log"; : >"$ctest_log"; : >"$edge_json"; : >"$runs_log"
printf 'stage\tstatus\tseconds\tnote\n' >"$stages_tsv"

# ------------------------------------------------------------------------------------------------
# Stages: each runs under `timeout`, with the smaller of its own limit and what the deadline
# leaves; its status and time go into stages.tsv and the final table.

stage_rows=()
record_stage() {  # name status seconds note
  stage_rows+=("$(printf '%-22s %-10s %6s  %s' "$1" "$2" "$3" "$4")")
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$stages_tsv"
}

# run_stage NAME LIMIT_S LOG COMMAND...: returns the command's status (124: out of time)
run_stage() {
  local name=$1 cap=$2 log=$3
  shift 3
  local left=$((deadline - SECONDS - final_reserve))
  local limit=$((cap < left ? cap : left))
  if ((limit < 10)); then
    echo "== $name: skipped, out of time (${SECONDS}s of ${deadline}s used)"
    record_stage "$name" "no time" 0 "deadline ${deadline}s reached"
    return 124
  fi
  echo "== [$(printf '%3d' $SECONDS)s] $name (limit ${limit}s, log $(basename "$log"))"
  echo "===== $name: $*" >>"$log"
  local start=$SECONDS status
  if declare -F "$1" >/dev/null; then
    # A shell function: timeout runs programs, so hand it to a child bash (exported, with the
    # variables it reads).
    export -f "${1?}"
    export prefix usr arch tag binary runs_log edge_json
    timeout -k 10 "$limit" bash -c "$(declare -p line_buffered); \"\$@\"" _ "$@" >>"$log" 2>&1
  else
    timeout -k 10 "$limit" "$@" >>"$log" 2>&1
  fi
  status=$?
  local took=$((SECONDS - start)) verdict=ok
  if ((status == 124 || status == 137)); then verdict="timed out"
  elif ((status != 0)); then verdict="failed"; fi
  echo "== [$(printf '%3d' $SECONDS)s] $name: $verdict (exit $status) in ${took}s"
  record_stage "$name" "$verdict" "$took" "exit $status, limit ${limit}s"
  return $status
}

note() { echo "gpu_run: $*"; echo "$*" >>"$env_log"; }

print_table() {  # the stages, then the summary's short form (removed: the output folder keeps 8 files)
  echo
  echo "================ gpu_run: ${SECONDS}s, files in $out ================"
  printf '%-22s %-10s %6s  %s\n' stage status s note
  printf '%s\n' "${stage_rows[@]}"
  if [[ -s "$out/summary-short.txt" ]]; then
    echo
    cat "$out/summary-short.txt"
  fi
  rm -f "$out/summary-short.txt"
}

# ------------------------------------------------------------------------------------------------
# 1. The machine: what is here, written to env.txt before anything can fail.
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "uname: $(uname -a)"
  grep -E '^(PRETTY_NAME|VERSION_ID)=' /etc/os-release 2>/dev/null
  echo "cpus: $jobs; $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null)"
  echo "glibc: $(ldd --version 2>/dev/null | head -1)"
  echo "git: $(git rev-parse HEAD 2>/dev/null || echo 'not a git checkout') $(git status --porcelain 2>/dev/null | wc -l) changed files"
  for tool in g++ nvcc cmake ninja python3 nvidia-smi; do
    echo "$tool: $(command -v $tool || echo absent)"
  done
  g++ --version 2>/dev/null | head -1
  nvcc --version 2>/dev/null | tail -2
  nvidia-smi 2>&1 | head -15
  python3 - <<'EOF' 2>&1
import importlib
for name in ("torch", "numpy", "matplotlib", "pytest", "cmake", "ninja"):
    try:
        module = importlib.import_module(name)
        print(f"python {name}: {getattr(module, '__version__', 'present')}")
    except Exception as error:
        print(f"python {name}: absent ({type(error).__name__})")
EOF
} >>"$env_log" 2>&1

have_gpu=0
gpu_name=""
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  have_gpu=1
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  note "GPU: $gpu_name"
else
  note "no GPU found (nvidia-smi absent or lists none): the GPU stages will be skipped"
fi

# ------------------------------------------------------------------------------------------------
# 2. The packages: .deb/*.deb unpacked into $prefix (dpkg-deb, or ar + tar where dpkg is absent).
arch=x86_64-linux-gnu
usr=$prefix/usr
unpack_debs() {
  rm -rf "$prefix" && mkdir -p "$prefix" || return 1
  local deb count=0
  for deb in .deb/*.deb; do
    if command -v dpkg-deb >/dev/null 2>&1; then
      dpkg-deb -x "$deb" "$prefix" || return 1
    else
      local member
      member=$(ar t "$deb" | grep '^data\.tar') || return 1
      ar p "$deb" "$member" | tar -x -C "$prefix" -f - || return 1
    fi
    count=$((count + 1))
  done
  echo "unpacked $count packages into $prefix"
  # A library the system already has must not shadow it for every other program: keep ours only
  # where the system has none (the Fortran runtime of OpenBLAS, typically).
  local lib
  for lib in libgfortran.so.5 libquadmath.so.0; do
    if ldconfig -p 2>/dev/null | grep -q "/$lib\$\| $lib "; then
      rm -f "$usr/lib/$arch/$lib"*
      echo "system has $lib: using it"
    fi
  done
}
if compgen -G ".deb/*.deb" >/dev/null; then
  run_stage unpack 60 "$build_log" unpack_debs
else
  note "no .deb/*.deb (scripts/gpu_fetch_debs.sh fetches it; copy .deb/ beside the checkout): using system packages only"
  record_stage unpack "none" 0 "no .deb folder: system packages only"
fi

openblas_lib=$usr/lib/$arch/openblas-pthread
openblas_include=$usr/include/$arch/openblas-pthread
if [[ -d "$usr" ]]; then
  # Debian puts package files in lib/<arch>/cmake, lib/cmake and share/cmake; list each, so
  # find_package() finds them even where CMake does not know the multiarch directory.
  export CMAKE_PREFIX_PATH="$usr:$usr/lib/$arch/cmake:$usr/lib/cmake:$usr/share/cmake${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export CPATH="$usr/include${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$usr/lib/$arch:$openblas_lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
  # The binaries also carry both in their RUNPATH (CMAKE_BUILD_RPATH below). OpenBLAS's folder
  # stays off LD_LIBRARY_PATH: it holds a libblas.so.3 other programs must not pick up.
  export LD_LIBRARY_PATH="$usr/lib/$arch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$PATH:$usr/bin"  # after the system's tools: ours only fill gaps
fi
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

# ------------------------------------------------------------------------------------------------
# 3. Tools: cmake (the system's, pip's, or a carried one), ninja or make.
cmake_bin=$(command -v cmake || true)
if [[ -z "$cmake_bin" ]]; then
  cmake_bin=$(python3 -c 'import cmake, os; print(os.path.join(cmake.CMAKE_BIN_DIR, "cmake"))' 2>/dev/null || true)
fi
if [[ -z "$cmake_bin" ]] || ! "$cmake_bin" --version >/dev/null 2>&1; then
  echo "gpu_run.sh: error: no working cmake here (not on PATH, not in python3's cmake package);" \
       "run scripts/gpu_fetch_debs.sh --with-cmake and copy .deb/ beside the checkout" >&2
  record_stage tools failed 0 "no cmake"
  print_table
  exit 3
fi
ctest_bin=$(dirname "$cmake_bin")/ctest
[[ -x "$ctest_bin" ]] || ctest_bin=$(command -v ctest || echo ctest)
generator="Unix Makefiles"
if command -v ninja >/dev/null 2>&1; then generator=Ninja
elif python3 -c 'import ninja' 2>/dev/null; then
  ninja_dir=$(python3 -c 'import ninja; print(ninja.BIN_DIR)')
  export PATH="$PATH:$ninja_dir"
  generator=Ninja
fi
note "cmake: $cmake_bin ($("$cmake_bin" --version | head -1)); generator: $generator; $jobs jobs"

# ------------------------------------------------------------------------------------------------
# 4. Configure and build.
cmake_args=(-S . -B "$build_dir" -G "$generator" -DCMAKE_BUILD_TYPE=Release
            -DCMAKE_CUDA_ARCHITECTURES=90 -DATTNBENCH_NATIVE=ON -DATTNBENCH_CUDA=ON
            -DCMAKE_POLICY_VERSION_MINIMUM=3.5)
if command -v nvcc >/dev/null 2>&1; then cmake_args+=(-DCMAKE_CUDA_COMPILER="$(command -v nvcc)"); fi
if [[ -d "$usr" ]]; then
  # LIBRARY_PATH makes CMake count these folders as the compiler's own and leave them out of the
  # RUNPATH: name them, so build-gpu/attnbench runs without LD_LIBRARY_PATH too.
  cmake_args+=(-DCMAKE_BUILD_RPATH="$usr/lib/$arch;$openblas_lib")
fi
if [[ -f "$openblas_lib/libopenblas.so" ]]; then
  # Debian's OpenBLAS lives in a flavour directory that update-alternatives would link: name it.
  cmake_args+=(-DBLA_VENDOR=OpenBLAS -DCMAKE_LIBRARY_PATH="$openblas_lib"
               -DCMAKE_INCLUDE_PATH="$openblas_include")
fi
if [[ -f "$build_dir/CMakeCache.txt" ]] && ! grep -q "^CMAKE_GENERATOR:INTERNAL=$generator\$" "$build_dir/CMakeCache.txt"; then
  rm -rf "$build_dir"  # made with another generator: cmake refuses to switch
fi
built=0
if run_stage configure 120 "$build_log" "$cmake_bin" "${cmake_args[@]}"; then
  # Where each package was found: the prefix's copy is the one this build must use.
  {
    echo "packages found (CMakeCache.txt):"
    grep -E '^(Eigen3|fmt|benchmark|tomlplusplus|CLI11|nlohmann_json|Catch2)_DIR:|^(CSV_INCLUDE_DIR|CSV_LIBRARY|BLAS_openblas_LIBRARY|CBLAS_INCLUDE_DIR|CMAKE_CUDA_COMPILER|CMAKE_CXX_COMPILER):' \
      "$build_dir/CMakeCache.txt" | sed "s|$prefix|<prefix>|"
    grep -E 'attnbench: CUDA variants' "$build_log" | tail -1
  } | tee -a "$env_log" | sed 's/^/   /'
  if run_stage build 330 "$build_log" "$cmake_bin" --build "$build_dir" --parallel "$jobs"; then
    built=1
  else
    echo "---- build.log: first errors, last lines ----"
    grep -E 'error|Error' "$build_log" | head -20
    tail -15 "$build_log"
  fi
else
  echo "---- build.log: configure errors ----"
  grep -A6 'CMake Error' "$build_log" | head -30
fi
binary=$repo/$build_dir/attnbench
if ((built)); then  # which copies of the shared libraries the binary loads
  ldd "$binary" 2>&1 | grep -E 'fmt|benchmark|toml|csv|openblas|gfortran|cublas|cudart|not found' |
    sed "s|$prefix|<prefix>|" | tee -a "$env_log" | sed 's/^/   /'
fi

# ------------------------------------------------------------------------------------------------
# 5. Tests: every ctest test (Catch2, CLI, pytest); the CUDA ones run on the GPU when there is one.
if ((built)); then
  # shellcheck disable=SC2206  # word splitting of the user's arguments is intended
  ctest_args=(${ATTNBENCH_GPU_CTEST_ARGS--E python.scripts})
  run_stage ctest 90 "$ctest_log" "$ctest_bin" --test-dir "$build_dir" --output-on-failure \
    -j "$jobs" --timeout 120 "${ctest_args[@]}"
  grep -E 'tests passed|tests failed|^\s+[0-9]+ - ' "$ctest_log" | tail -12 | sed 's/^/   /'
fi

made=()  # the results folders this run made (and only those: older ones may lie beside them)
finish() {  # the summary, the archive and the table; then exit
  local code=$1
  local folders=() folder
  final_reserve=0  # this is what it was kept for
  for folder in "${made[@]}"; do
    [[ -f "$folder/manifest.json" ]] && folders+=("$folder")
  done
  if ((${#folders[@]})) || [[ -s "$ctest_log" ]]; then
    run_stage summary 30 "$runs_log" python3 scripts/gpu_summary.py "${folders[@]}" \
      --edge-json "$edge_json" --ctest-log "$ctest_log" --out "$out/summary.md" \
      --short "$out/summary-short.txt"
  fi
  if ((${#folders[@]})); then
    tar -czf "$out/results.tar.gz" "${folders[@]}" 2>>"$runs_log" &&
      note "results.tar.gz: ${folders[*]} ($(du -h "$out/results.tar.gz" | cut -f1))"
  fi
  print_table
  exit "$code"
}

tag=${ATTNBENCH_GPU_TAG:-}
if [[ -z "$tag" ]]; then
  tag=$(echo "${gpu_name:-nogpu}" | tr '[:upper:]' '[:lower:]' | sed 's/^nvidia //; s/[^a-z0-9]\{1,\}/-/g; s/^-//; s/-$//')
  [[ -n "$tag" ]] || tag=gpu
fi

if ((!built)); then
  note "no binary: nothing more to run"
  finish 1
fi
# Every sweep planned (`attnbench plan` runs nothing): one whose config or arguments the binary
# refuses is said here, in a dry run too, and skipped below.
# shellcheck source=scripts/gpu_sweeps.sh
source scripts/gpu_sweeps.sh
declare -A unplanned=()
for name in "${gpu_sweeps[@]}"; do
  gpu_sweep_args "$name"
  if ! plan_error=$(timeout 60 "$binary" plan "configs/$name.toml" "${sweep_args[@]}" 2>&1 >/dev/null); then
    unplanned[$name]=1
    note "sweep $name: its plan fails, so it is skipped: $(tail -1 <<<"$plan_error")"
    record_stage "plan $name" failed 0 "$(tail -1 <<<"$plan_error")"
  fi
done
if [[ "$dry" == 1 || $have_gpu == 0 ]]; then
  if [[ "$dry" == 1 ]]; then note "dry run: stopping after build, ctest and the sweeps' plans"; fi
  if ((have_gpu == 0)); then note "no GPU: the GPU stages (edge check, sweeps, torch) are skipped"; fi
  finish $((${#unplanned[@]} > 0))
fi

# ------------------------------------------------------------------------------------------------
# 6. The oracle on edge shapes, every CUDA variant (no timing).
edge_check() {  # check's JSON alone in edge-check.json; its progress lines (stderr) to runs.log
  "$binary" check configs/gpu-edge.toml --json >"$edge_json"
}
run_stage edge-check 60 "$runs_log" edge_check
python3 -c 'import json, sys
print("{passed} passed, {failed} failed, {skipped} skipped".format(**json.load(open(sys.argv[1]))))' \
  "$edge_json" 2>/dev/null | sed 's/^/   /'

# ------------------------------------------------------------------------------------------------
# 7. The sweeps (scripts/gpu_sweeps.sh: which, and each one's reduced arguments), planned above.

results_folder() {  # a fresh results/<tag>-<name>, never one that exists
  local folder=results/$tag-$1
  [[ -e "$folder" ]] && folder=$folder-$(date -u +%H%M%S)
  echo "$folder"
}

sweep() {  # sweep NAME LIMIT ARGS...: attnbench run configs/NAME.toml into results/<tag>-NAME
  local name=$1 cap=$2
  shift 2
  local folder
  folder=$(results_folder "$name")
  run_stage "run $name" "$cap" "$runs_log" "${line_buffered[@]}" "$binary" run "configs/$name.toml" --out "$folder" "$@"
  recorded "$folder"
}

recorded() {  # keep a results folder the stage made; say how many cases it holds
  [[ -f "$1/cases.jsonl" ]] || return 0
  made+=("$1")
  echo "   $1: $(wc -l <"$1/cases.jsonl") cases recorded"
}

torch_ok=0
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  torch_ok=1
else
  note "torch with CUDA does not import here: no PyTorch peer"
fi
peer() {  # peer NAME LIMIT ARGS...: PyTorch SDPA on configs/NAME.toml's shapes
  local name=$1 cap=$2
  shift 2
  local folder
  folder=$(results_folder "torch-$name")
  run_stage "torch $name" "$cap" "$runs_log" env PYTHONUNBUFFERED=1 python3 scripts/peers/torch_sdpa.py \
    "configs/$name.toml" --out "$folder" --device cuda --attnbench "$binary" "$@"
  recorded "$folder"
}

axes_of() {  # the `--set axes.*=...` pairs among the arguments: the peer times the same shapes
  local previous=""
  for argument in "$@"; do
    [[ "$previous" == --set && "$argument" == axes.* ]] && printf '%s\n' --set "$argument"
    previous=$argument
  done
}

run_sweep() {  # run_sweep NAME LIMIT: gpu_sweeps.sh's sweep NAME, unless its plan failed above
  [[ -z "${unplanned[$1]:-}" ]] && gpu_sweep_args "$1" || return 0
  sweep "$1" "$2" "${sweep_args[@]}"
}
run_peer() {  # run_peer NAME LIMIT: PyTorch on sweep NAME's shapes
  ((torch_ok)) && [[ -z "${unplanned[$1]:-}" ]] && gpu_sweep_args "$1" || return 0
  mapfile -t peer_set < <(axes_of "${sweep_args[@]}")
  peer "$1" "$2" "${peer_set[@]}"
}
# In order of what matters most; later ones get what time is left.
run_sweep gpu-scaling 130
run_peer gpu-scaling 75
run_sweep fa-shapes 90
run_sweep decode-gpu 50
run_sweep gpu-masks 60
run_peer fa-shapes 45

# ------------------------------------------------------------------------------------------------
# 8. Plots (plot_all.py per results folder) where matplotlib imports.
if python3 -c 'import matplotlib' 2>/dev/null; then
  plot_all() {  # plot_all FOLDER...
    local folder status=0
    for folder in "$@"; do
      [[ -s "$folder/cases.jsonl" ]] || continue
      python3 scripts/plot_all.py "$folder" || status=1
    done
    return "$status"
  }
  run_stage plots 45 "$runs_log" plot_all "${made[@]}"
else
  note "matplotlib does not import: no plots"
fi

finish 0
