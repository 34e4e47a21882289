#!/bin/bash
# dev.sh - build Sluice, run its demo, run its tests, on Debian 12.
#
#   ./dev.sh demo    install what is missing, build, run examples/hello
#   ./dev.sh test    install what is missing, build, run the whole test suite
#   ./dev.sh build   install what is missing, build (and npm ci the Node
#                    client's dependencies from its lockfile)
#   ./dev.sh fuzz    install what is missing, build, run every fuzz target
#                    for FUZZ_SECONDS (default 30) each (make fuzz)
#
# Both are idempotent: packages are installed only when missing (apt-get,
# as root), autotools run only when their inputs changed, and the build in
# $BUILD_DIR (default _build) is incremental. Environment:
#   BUILD_DIR         where to build (out of the source tree)
#   CFLAGS            compiler flags (a change reconfigures the build)
#   CONFIGURE_FLAGS   extra ./configure flags, e.g. --enable-sanitizers=...
#   CHECK_JOBS        tests run at once by ./dev.sh test (default: 2 per core)
set -euo pipefail

cd "$(dirname "$0")"
src=$(pwd)
build=${BUILD_DIR:-_build}
jobs=$(nproc 2>/dev/null || echo 2)
# Tests mostly wait (on servers, leases, timeouts): two per core keep the
# cores busy where one each left them half idle, and the suite is made to
# pass on a busy machine (tests/stress.sh).
check_jobs=${CHECK_JOBS:-$((jobs * 2))}

packages=(build-essential autoconf automake libtool pkg-config
  libglib2.0-dev libhiredis-dev libsqlite3-dev libmsgpack-dev libjson-glib-dev check
  libssl-dev openssl curl
  libsystemd-dev libsoup-3.0-dev glib-networking redis-server clang-format clang libclang-rt-14-dev
  python3 chromium chromium-driver python3-redis python3-msgpack python3-pytest
  python3-cryptography
  python3-venv python3-setuptools python3-wheel systemd man-db
  abigail-tools
  nodejs)
# npm comes with some builds of nodejs (NodeSource's); Debian packages it
# apart, and its npm package would conflict with the former.
command -v npm >/dev/null 2>&1 || packages+=(npm)

install_packages() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "dev.sh: missing packages: ${missing[*]}" >&2
    echo "dev.sh: run as root, or: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "dev.sh: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

build() {
  install_packages
  if [ ! -x configure ] || [ configure.ac -nt configure ]; then
    autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
  fi
  mkdir -p "$build"
  local flags="${CFLAGS:--O2 -g} | ${CONFIGURE_FLAGS:-}"
  if [ ! -f "$build/Makefile" ] || [ "$(cat "$build/.dev-flags" 2>/dev/null)" != "$flags" ]; then
    (cd "$build" && CFLAGS="${CFLAGS:--O2 -g}" "$src/configure" -q \
      ${CONFIGURE_FLAGS:-})
    echo "$flags" >"$build/.dev-flags"
  fi
  make -C "$build" -j"$jobs" -s >/dev/null
  node_modules
}

# The Node client's dependencies, from its lockfile, when missing or when
# the lockfile changed. On a machine that never fetched them that needs the
# network (they are not Debian packages); a reinstall takes them from npm's
# cache when it holds them. Never at run time.
node_modules() {
  local dir=clients/node
  if [ ! -f "$dir/node_modules/.package-lock.json" ] ||
    [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    (cd "$dir" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error >/dev/null)
  fi
}

case "${1:-}" in
build)
  build
  ;;
demo)
  build
  "$build/examples/hello/hello"
  ;;
test)
  build
  if ! make -C "$build" -j"$check_jobs" -s check; then
    echo "dev.sh: tests failed; logs of the failures:" >&2
    failed=()
    for log in $(find "$build" -name '*.log' ! -name config.log ! -name test-suite.log); do
      grep -q '^:test-result: \(FAIL\|ERROR\)' "${log%.log}.trs" 2>/dev/null &&
        { failed+=("$log"); echo "---- $log"; tail -n 60 "$log"; } >&2
    done
    # Last, so that a reader of only the end of the output (a CI summary)
    # still sees which checks failed, however long the logs above are.
    echo "dev.sh: the failed checks:" >&2
    for log in "${failed[@]}"; do
      grep -h -E ':[EF]:|^(FAIL|ERROR)' "$log" | tail -n 10 >&2 || true
    done
    exit 1
  fi
  ;;
fuzz)
  build
  make -C "$build" -s fuzz FUZZ_SECONDS="${FUZZ_SECONDS:-30}"
  ;;
*)
  echo "usage: $0 demo|test|build|fuzz" >&2
  exit 2
  ;;
esac
