#!/bin/sh
# lua-copies.sh - every client ships the broker's Lua files unchanged: each
# file of brokers/redis/lua/ (and VERSION, the version of the set) must be
# in clients/python/sluice/lua/ and clients/node/lua/ byte for byte, and
# nothing else must be there.
# `make client-lua` refreshes the copies.
set -u
src=${SLUICE_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tree=$src/brokers/redis/lua
status=0
for copy in "$src/clients/python/sluice/lua" "$src/clients/node/lua"; do
  for f in $(cd "$tree" && find . -name '*.lua' | sort) ./VERSION; do
    if ! cmp -s "$tree/$f" "$copy/$f"; then
      echo "lua-copies: $copy/$f differs from $tree/$f: run make client-lua" >&2
      status=1
    fi
  done
  for f in $(cd "$copy" && find . -name '*.lua' | sort); do
    if [ ! -f "$tree/$f" ]; then
      echo "lua-copies: $copy/$f is not in $tree: remove it" >&2
      status=1
    fi
  done
done
[ $status -eq 0 ] && echo "lua-copies: 2 passed, 0 failed"
exit $status
