#!/usr/bin/env bash
# Builds one libFuzzer target with clang (ASan and UBSan on) and runs it over its corpus for a
# bounded time. Used by ctest (fuzz.config, fuzz.npy); by hand:
#   bash tests/fuzz/run.sh config build [SECONDS]       # SECONDS defaults to 30
# New inputs libFuzzer finds go to BUILD/fuzz/TARGET-corpus, never into the tree; a finding is
# written to BUILD/fuzz/TARGET-crash-* and fails the run. Add a finding, once fixed, to
# tests/fuzz/corpus/TARGET/ so it is replayed on every run.
set -euo pipefail
target=$1
build=$(realpath "$2")
seconds=${3:-${ATTNBENCH_FUZZ_SECONDS:-30}}
cd "$(dirname "$0")/../.."

case "$target" in
  config) sources=(tests/fuzz/config_fuzzer.cpp harness/plan/config.cpp harness/plan/settings.cpp
                   harness/plan/config_keys.cpp harness/plan/config_reader.cpp
                   harness/plan/axes_table.cpp harness/plan/toml_depth.cpp harness/core/case.cpp
                   harness/core/mask.cpp
                   harness/core/distribution.cpp harness/core/dtype.cpp harness/core/shape.cpp
                   harness/core/pass.cpp harness/core/kv_cache.cpp harness/core/kv_quant.cpp) ;;
  npy) sources=(tests/fuzz/npy_fuzzer.cpp harness/results/npy_io.cpp harness/results/npy_format.cpp
                harness/results/atomic_file.cpp harness/results/regular_file.cpp
                harness/core/element_types.cpp) ;;
  *) echo "run.sh: unknown fuzz target '$target' (config, npy)" >&2; exit 2 ;;
esac

clangxx=${ATTNBENCH_CLANGXX:-clang++}
out="$build/fuzz"
mkdir -p "$out/$target-corpus"
binary="$out/$target-fuzzer"
# Rebuilt only when a source or header is newer than the binary.
if [ ! -x "$binary" ] || [ -n "$(find harness tests/fuzz/*.cpp tests/fuzz/run.sh -newer "$binary" | head -1)" ]; then
  # toml++ compiled in (header-only mode), so its parser is instrumented as well. NDEBUG as in
  # the release build: toml++ 3.3's internal debug assertions fire on some syntax errors (a
  # table header such as [%]) that the release parser reports as errors, as it should.
  # -fno-sanitize=unreachable: toml++ 3.3's is_non_ascii_horizontal_whitespace() reaches its
  # TOML_UNREACHABLE for U+00A1..U+0499 after a value (corpus: non-ascii-after-value.toml); the
  # release parser returns "not whitespace" there and reports the syntax error. Upstream's bug,
  # not ours: every other check stays on.
  "$clangxx" -std=c++17 -O1 -g -DNDEBUG -fsanitize=fuzzer,address,undefined \
    -fno-sanitize=unreachable -fno-sanitize-recover=undefined -DTOML_HEADER_ONLY=1 -I. -I/usr/include/eigen3 \
    "${sources[@]}" -lfmt -o "$binary"
fi
"$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$out/$target-" "$out/$target-corpus" "tests/fuzz/corpus/$target"
