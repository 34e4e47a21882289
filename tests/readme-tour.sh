#!/bin/sh
# readme-tour.sh - README's tour is examples/tour/tour.c, quoted whole: fail
# when the two drift apart.
set -eu
src=${SLUICE_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
quoted=$(mktemp)
trap 'rm -f "$quoted"' EXIT
awk '/^## A tour$/ { tour = 1 } tour && /^```c$/ { copy = 1; next }
     copy && /^```$/ { exit } copy { print }' "$src/README.md" >"$quoted"
if ! cmp -s "$quoted" "$src/examples/tour/tour.c"; then
  echo "README.md's tour differs from examples/tour/tour.c:" >&2
  diff -u "$src/examples/tour/tour.c" "$quoted" >&2 || true
  exit 1
fi
