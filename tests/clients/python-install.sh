#!/bin/sh
# python-install.sh - docs/clients.md's install of the Python client works
# with what Debian ships and no network: the command it documents (a virtual
# environment that sees Debian's packages, pip with --no-index and
# --no-build-isolation) builds and installs clients/python, and the
# installed package imports, with its Lua scripts, from outside the tree.
# --no-index keeps pip off the network, as on a machine without one.
# Skips (77) without python3-venv or the Debian packages it builds with,
# unless CI is set (CI has them all: a skip would hide the test).
set -u
src=${SLUICE_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
command="pip install --no-index --no-build-isolation clients/python"
skip() {
  if [ -n "${CI:-}" ]; then
    echo "python-install: $1 (CI is set: a failure, not a skip)" >&2
    exit 1
  fi
  echo "python-install: skipped: $1" >&2
  exit 77
}
fail() {
  echo "python-install: $*" >&2
  exit 1
}

if ! grep -qF "$command" "$src/docs/clients.md"; then
  fail "docs/clients.md no longer documents \`$command\`: update this test with it"
fi
py=
for p in /usr/bin/python3 python3; do
  if "$p" -c 'import venv, ensurepip, setuptools, wheel, redis, msgpack, cryptography' \
    2>/dev/null; then
    py=$p
    break
  fi
done
[ -n "$py" ] || skip "no python3 with venv, setuptools, wheel, redis, msgpack and cryptography: apt-get install python3-venv python3-setuptools python3-wheel python3-redis python3-msgpack python3-cryptography"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-pyinstall-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
# A copy: a build writes build/ and sluice.egg-info/ into the tree it is
# given.
mkdir -p "$tmp/tree/clients"
cp -R "$src/clients/python" "$tmp/tree/clients/python" || exit 1
"$py" -m venv --system-site-packages "$tmp/env" ||
  fail "python3 -m venv --system-site-packages failed"
if ! (cd "$tmp/tree" && PIP_DISABLE_PIP_VERSION_CHECK=1 \
  "$tmp/env/bin/"$command >"$tmp/pip.log" 2>&1); then
  cat "$tmp/pip.log" >&2
  fail "\`$command\` failed in a virtual environment with Debian's packages"
fi
# From elsewhere: the installed copy, not the tree; its scripts are there.
# The installed package must hash the same script set as the tree's
# (every .lua file ships, or the namespace's clients refuse each other).
tree_sha=$(cd "$src/clients/python" && "$py" -c 'import sluice.protocol as p; print(p.SCRIPTS_SHA1)') ||
  fail "the tree's package does not import"
(cd "$tmp" && "$tmp/env/bin/python" - "$tmp/env" "$tree_sha" <<'PY') || fail "the installed package does not work"
import os
import sys

import sluice
import sluice.protocol as p

where = os.path.realpath(sluice.__file__)
assert where.startswith(os.path.realpath(sys.argv[1])), where
for mode in ("fast", "reliable"):
    assert p.scripts_for(mode), mode
assert p.SCRIPTS_SHA1 == sys.argv[2], "the installed package lacks Lua files"
c = sluice.Client("redis://127.0.0.1:1/0")
assert c.settings.mode == "reliable"
c.close()
print("python-install: %s installed without the network" % where)
PY
exit 0
