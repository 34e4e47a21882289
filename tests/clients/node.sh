#!/bin/sh
# node.sh - the Node client's tests (clients/node/test): its own, and
# those against the C build (c-oracle, `sluice worker`), which must not
# skip here. Its dependencies come from its lockfile (dev.sh build runs
# npm ci there); nothing is fetched at test time.
set -u
src=${SLUICE_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$src/clients/node" || exit 1
if ! command -v node >/dev/null 2>&1; then
  echo "node.sh: node is missing: apt-get install nodejs npm" >&2
  exit 1
fi
if [ ! -f node_modules/.package-lock.json ]; then
  echo "node.sh: clients/node/node_modules is missing: run ./dev.sh build (or npm ci in clients/node)" >&2
  exit 1
fi
SLUICE_REQUIRE_BUILD=1 exec node --test test/*.test.js
