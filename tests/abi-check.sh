#!/bin/bash
# abi-check.sh - the library's ABI against the baseline in abi/.
#
#   tests/abi-check.sh BUILD_DIR            compare (what .ci/run does)
#   tests/abi-check.sh --update BUILD_DIR   write the baseline anew
#
# abi/libsluice.abi is libabigail's description (abidw) of libsluice.so's
# exported functions and the public types they reach, as of the last time
# the ABI was allowed to change. abidiff compares a build against it:
#   - a compatible change (a function added, nothing a program compiled
#     against the baseline could notice) passes and is printed;
#   - an incompatible change (a function removed or its signature changed,
#     a public struct's size or layout changed, even by a field added at
#     its end, an enum value renumbered) fails,
#     unless the library's soname changed too: a new soname is the promise
#     that old programs keep the old library (docs/upgrading.md, "ABI").
# After a deliberate change, `--update` writes the new baseline; commit it
# with the change so review sees both.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
update=no
if [ "${1:-}" = "--update" ]; then
  update=yes
  shift
fi
build=${1:?usage: tests/abi-check.sh [--update] BUILD_DIR}
lib="$build/.libs/libsluice.so"
baseline="$src/abi/libsluice.abi"

for tool in abidw abidiff; do
  command -v "$tool" >/dev/null || {
    echo "abi-check: $tool is missing: apt-get install abigail-tools" >&2
    exit 1
  }
done
[ -e "$lib" ] || { echo "abi-check: no $lib: build first" >&2; exit 1; }

# Only what the public headers declare is ABI: the private headers'
# types stay out of the description.
headers=(--headers-dir "$src/include/sluice")

if [ "$update" = yes ]; then
  mkdir -p "$src/abi"
  abidw "${headers[@]}" --drop-private-types --no-corpus-path --short-locs \
    --no-comp-dir-path --out-file "$baseline" "$lib"
  echo "abi-check: wrote $baseline"
  exit 0
fi

[ -e "$baseline" ] || {
  echo "abi-check: no baseline $baseline: run tests/abi-check.sh --update" >&2
  exit 1
}

# Added functions are the compatible kind: --no-added-syms leaves them out
# of the verdict, and the second run only lists them. Anything else abidiff
# reports (a symbol removed, a signature, a public struct's size or layout,
# an enum's values) breaks a program built against the baseline.
status=0
abidiff --no-added-syms --headers-dir2 "$src/include/sluice" "$baseline" \
  "$lib" || status=$?
# abidiff's status is a bit field: 1 error, 2 usage, 4 the ABIs differ,
# 8 some difference is a removal.
if [ $((status & 3)) -ne 0 ]; then
  echo "abi-check: abidiff failed (status $status)" >&2
  exit 1
fi
if [ $((status & 12)) -ne 0 ]; then
  old=$(sed -n "s/.*soname='\([^']*\)'.*/\1/p" "$baseline" | head -1)
  new=$(objdump -p "$lib" | awk '$1 == "SONAME" { print $2 }')
  if [ "$old" = "$new" ]; then
    echo "abi-check: an incompatible ABI change (above) under the same" \
      "soname $new: keep the old symbol or layout, or change the" \
      "library's -version-info (Makefile.am) so that the soname changes," \
      "then run tests/abi-check.sh --update" >&2
    exit 1
  fi
  echo "abi-check: incompatible changes, with a new soname ($old -> $new)"
  exit 0
fi
added=0
abidiff --headers-dir2 "$src/include/sluice" "$baseline" "$lib" \
  >"$build/abi-added.txt" || added=$?
if [ "$added" -ne 0 ]; then
  cat "$build/abi-added.txt"
  echo "abi-check: compatible: only additions (above)"
else
  echo "abi-check: the ABI is the baseline's"
fi
