#!/bin/sh
# python.sh - the Python client's tests (clients/python/tests): its own,
# and those against the C build (c-oracle, `sluice worker`), which must
# not skip here. Needs python3-redis, python3-msgpack, python3-pytest,
# python3-cryptography (sealing).
#
# Without them a plain `make check` (a packager's) skips, saying why; with
# CI set that is a failure, since CI installs them. SLUICE_TEST_PYTHON
# names the interpreters to try instead of the Debian one and python3.
set -u
src=${SLUICE_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
# The Debian interpreter first: another python3 on PATH (a virtualenv, a
# version manager) may lack the Debian packages.
for py in ${SLUICE_TEST_PYTHON:-/usr/bin/python3 python3}; do
  if "$py" -c 'import redis, msgpack, pytest, cryptography' 2>/dev/null; then
    cd "$src/clients/python" || exit 1
    SLUICE_REQUIRE_BUILD=1 PYTHONDONTWRITEBYTECODE=1 \
      exec "$py" -m pytest -q -p no:cacheprovider tests
  fi
done
echo "python.sh: no python3 with redis, msgpack, pytest and cryptography: apt-get install python3-redis python3-msgpack python3-pytest python3-cryptography" >&2
if [ -n "${CI:-}" ]; then
  exit 1
fi
echo "python.sh: skipped (CI is not set)" >&2
exit 77
