#!/usr/bin/env bash
# The rooms of harness/ and variants/ include only rooms below them (CONTRIBUTING.md's table), so
# the code reads from the bottom up and no change to a lower room has to know a higher one.
# Fails naming every include that points up or sideways. Usage: include_rooms.sh [SOURCE_DIR]
set -euo pipefail
cd "${1:-$(dirname "$0")/../..}"

# Each room and the rooms it may include besides itself.
declare -A may_include=(
  [harness/core]=""
  [harness/simd]="harness/core"
  [harness/variant]="harness/core"
  [harness/plan]="harness/core harness/variant"
  [harness/measure]="harness/core harness/simd harness/variant"
  [harness/cuda]="harness/core harness/variant harness/measure"
  [harness/results]="harness/core harness/plan harness/measure"
  [harness/runner]="harness/core harness/variant harness/plan harness/measure harness/results"
  [harness/cli]="harness/core harness/simd harness/variant harness/plan harness/measure
                 harness/results harness/runner"
  [variants/cpu]="harness/core harness/simd harness/variant"
  [variants/cuda]="harness/core harness/variant harness/cuda"
)

failed=0
for folder in harness/* variants/*; do
  [ -d "$folder" ] || continue
  if [ -z "${may_include[$folder]+set}" ]; then
    echo "include_rooms: $folder is not a room of the table in $0 (add it, with what it may include)"
    failed=1
    continue
  fi
  allowed=" $(echo "$folder" ${may_include[$folder]}) "  # one space between names
  while IFS= read -r line; do
    file=${line%%:*}
    target=$(sed -E 's/.*#include "((harness|variants)\/[a-z_0-9]+)\/.*/\1/' <<<"$line")
    case "$allowed" in
      *" $target "*) ;;
      *) echo "include_rooms: $file includes $target (allowed: $(echo ${may_include[$folder]:-none}))"
         failed=1 ;;
    esac
  done < <(grep -rnE '#include "(harness|variants)/[a-z_0-9]+/' "$folder" || true)
done
((failed == 0)) && echo "include_rooms: every include points down"
exit "$failed"
