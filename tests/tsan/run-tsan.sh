#!/bin/sh
# run-tsan.sh - run the threaded test programs under ThreadSanitizer.
#
# Debian's GLib implements GMutex and GCond with raw futexes that TSan cannot
# see, so against the stock library every lock hand-off looks like a data
# race. This script builds GLib (Debian's own source, same version) with
# -fsanitize=thread once, into $TSAN_GLIB (default: ../tsan-glib next to the
# source tree), builds Sluice with -fsanitize=thread, and runs the given test
# programs (default: the memory conformance suite and the core tests) with
# the instrumented GLib, G_SLICE=always-malloc (GSlice's magazines race by
# design) and all scenarios in one process (CK_FORK=no), so TSan sees every
# thread interleaving of the whole run.
#
# Usage (root, for apt-get): tests/tsan/run-tsan.sh [test-program ...]
set -eu

src=$(cd "$(dirname "$0")/../.." && pwd)
tsan_glib=${TSAN_GLIB:-$src/../tsan-glib}
build=${TSAN_BUILD:-$src/_build-tsan}
tests=${*:-tests/test-memory tests/test-core}

need=""
for p in meson ninja-build dpkg-dev libglib2.0-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
fi

libdir="$tsan_glib/inst/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)"
if [ ! -e "$libdir/libglib-2.0.so.0" ]; then
  mkdir -p "$tsan_glib"
  cd "$tsan_glib"
  if [ ! -d glib-src ]; then
    # Debian's sources list may lack deb-src lines; add them for this fetch.
    list=/etc/apt/sources.list.d/sluice-tsan-src.sources
    if ! apt-get source --print-uris glib2.0 >/dev/null 2>&1; then
      sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources >"$list"
      apt-get update -qq
    fi
    apt-get source -qq glib2.0
    mv glib2.0-*/ glib-src
  fi
  meson setup build glib-src --prefix="$tsan_glib/inst" \
    -Db_sanitize=thread -Dtests=false -Dinstalled_tests=false -Dman=false \
    -Dgtk_doc=false -Dlibmount=disabled -Dselinux=disabled \
    -Dsysprof=disabled -Dnls=disabled --buildtype=debugoptimized >/dev/null
  ninja -C build install >/dev/null
fi

mkdir -p "$build"
cd "$build"
[ -f Makefile ] || "$src/configure" -q --enable-sanitizers=thread CFLAGS="-O1 -g"
make -j"$(nproc)" $tests >/dev/null

status=0
for t in $tests; do
  echo "== $t under ThreadSanitizer"
  LD_LIBRARY_PATH="$libdir" G_SLICE=always-malloc CK_FORK=no \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 die_after_fork=0 suppressions=$src/tests/tsan/tsan.supp" "./$t" || status=1
done
exit $status
