#!/bin/sh
# skips.sh - the clients' test scripts without their dependencies: a plain
# `make check` (a packager's, with no node_modules) skips them (exit 77)
# and says why; with CI set they fail instead, since CI has everything.
set -u
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir -p "$tmp/src/clients/node" "$tmp/src/clients/python" "$tmp/empty"
failed=0

# expect STATUS WORDS SCRIPT [ENV...]: runs SCRIPT under env ENV...
# (CI unset unless given) and checks its status and that its stderr says
# WORDS.
expect() {
  want=$1 words=$2 script=$3
  shift 3
  env -u CI "$@" /bin/sh "$here/$script" >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" -ne "$want" ] || ! grep -q "$words" "$tmp/err"; then
    echo "skips.sh: $script with $*: status $got (want $want), stderr:" >&2
    cat "$tmp/err" >&2
    failed=1
  fi
}

# Node: no node_modules (a fresh checkout), and no node at all.
expect 77 "node_modules is missing" node.sh SLUICE_SRCDIR="$tmp/src"
expect 1 "node_modules is missing" node.sh SLUICE_SRCDIR="$tmp/src" CI=1
expect 77 "node is missing" node.sh SLUICE_SRCDIR="$tmp/src" PATH="$tmp/empty"
expect 1 "node is missing" node.sh SLUICE_SRCDIR="$tmp/src" PATH="$tmp/empty" CI=1
# Python: no interpreter with redis, msgpack and pytest.
expect 77 "no python3 with redis" python.sh SLUICE_SRCDIR="$tmp/src" \
  SLUICE_TEST_PYTHON=/bin/false
expect 1 "no python3 with redis" python.sh SLUICE_SRCDIR="$tmp/src" \
  SLUICE_TEST_PYTHON=/bin/false CI=1
exit $failed
