#!/bin/sh
# node.sh - the Node client's tests (clients/node/test): its own, and
# those against the C build (c-oracle, `sluice worker`), which must not
# skip here. Its dependencies come from its lockfile (dev.sh build runs
# npm ci there); nothing is fetched at test time.
#
# Without node or the lockfile's node_modules, a plain `make check` (a
# packager's) skips, saying why; with CI set that is a failure, since CI
# installs both.
set -u
src=${SLUICE_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}

missing() {
  echo "node.sh: $1" >&2
  if [ -n "${CI:-}" ]; then
    exit 1
  fi
  echo "node.sh: skipped (CI is not set)" >&2
  exit 77
}

cd "$src/clients/node" || exit 1
if ! command -v node >/dev/null 2>&1; then
  missing "node is missing: apt-get install nodejs npm"
fi
if [ ! -f node_modules/.package-lock.json ]; then
  missing "clients/node/node_modules is missing: run ./dev.sh build (or npm ci in clients/node)"
fi
SLUICE_REQUIRE_BUILD=1 exec node --test test/*.test.js
