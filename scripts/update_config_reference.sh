#!/usr/bin/env bash
# Rewrites the configuration reference in docs/configuration.md, between its begin and end marker
# lines, with what `attnbench config reference` prints:
#   bash scripts/update_config_reference.sh [BINARY]     # BINARY defaults to build/attnbench
set -euo pipefail
cd "$(dirname "$0")/.."
document=docs/configuration.md
binary=${1:-build/attnbench}
reference=$(mktemp)
updated=$(mktemp)
trap 'rm -f "$reference" "$updated"' EXIT
"$binary" config reference > "$reference"
grep -q '^<!-- begin config reference' "$document" && grep -q '^<!-- end config reference' "$document" \
  || { echo "update_config_reference.sh: $document lacks the reference's marker lines" >&2; exit 2; }
awk -v reference="$reference" '
  /^<!-- begin config reference/ { print; while ((getline line < reference) > 0) print line; skip = 1; next }
  /^<!-- end config reference/ { skip = 0 }
  !skip { print }
' "$document" > "$updated"
cat "$updated" > "$document"
