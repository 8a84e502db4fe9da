#!/usr/bin/env bash
# Each SIMD path's translation units (lib attnbench_isa_kernels) are compiled with that path's
# instruction set. A function they emit as a weak (COMDAT) definition that the rest of the
# program also uses -- an inline std:: helper, a harness header's inline function -- may be the
# copy the linker keeps, and then code outside the path runs the path's instructions: an illegal
# instruction on a CPU without them. So every weak symbol of a path's object must belong to that
# path: a template instantiated on the path's SIMD type. Usage: isa_symbols.sh BUILD_DIR
set -euo pipefail
build_dir=${1:?usage: isa_symbols.sh BUILD_DIR}
objects=$(find "$build_dir/CMakeFiles/attnbench_isa_kernels.dir" -name 'kernels_*.o' | sort)
[ -n "$objects" ] || { echo "isa_symbols: no kernels_*.o under $build_dir"; exit 1; }
failed=0
for object in $objects; do
  path=$(basename "$object" .cpp.o)
  path=${path#kernels_}
  case "$path" in
    scalar) own='simd::Scalar' ;;
    avx2) own='simd::Avx2' ;;
    avx512) own='simd::Avx512[,>]' ;;
    avx512_bf16) own='Avx512WithBf16|flash_cpu::Bf16Dot' ;;
    amx_bf16) own='Avx512WithAmx|simd::AmxTiles' ;;
    amx_bf16_emulated) own='Avx512WithEmulatedTiles' ;;
    avx512_bf16_emulated) own='EmulatedAvx512WithBf16' ;;
    neon) own='simd::Neon' ;;
    *) echo "isa_symbols: $object: unknown path '$path' (add it here)"; failed=1; continue ;;
  esac
  # Weak definitions (W, V) and unique globals (u); kColumnIndex is constant data, the same bytes
  # in every object.
  foreign=$(nm -C --defined-only "$object" | awk '$2 ~ /^[WVu]$/' | cut -d' ' -f3- |
            grep -Ev "$own" | grep -Ev '^attnbench::flash_cpu::kColumnIndex$' ||
            true)
  if [ -n "$foreign" ]; then
    echo "isa_symbols: $object ($path) emits weak symbols outside its path:"
    echo "$foreign" | sed 's/^/  /'
    failed=1
  fi
done
if [ "$failed" -eq 0 ]; then
  echo "isa_symbols: $(echo "$objects" | wc -l) path objects, every weak symbol their own"
fi
exit "$failed"
