#!/bin/sh
# linked-libraries.sh - a program that wants only the memory and SQLite
# brokers (tests/helpers/local-brokers) runs, and neither it nor libsluice
# needs a library of a part it does not use: never libsoup, libsystemd or
# json-glib (the command's and the tests' own), and hiredis or libsqlite3
# only when configure built that broker. It reads the NEEDED entries of
# the ELF files (readelf -d) of this build: in a build configured
# --without-redis it shows that such a program links no hiredis.
set -eu
build=${SLUICE_BUILDDIR:?run me from make check}
with_redis=${SLUICE_WITH_REDIS:-yes}
with_sqlite=${SLUICE_WITH_SQLITE:-yes}
status=0

command -v readelf >/dev/null 2>&1 || {
  echo "linked-libraries: readelf (binutils) is needed" >&2
  exit 77
}
dlname=$(sed -n "s/^dlname='\(.*\)'$/\1/p" "$build/libsluice.la")
if [ -z "$dlname" ]; then
  echo "linked-libraries: libsluice is built static only: nothing to read" >&2
  exit 77
fi
lib=$build/.libs/$dlname
# libtool keeps the program itself in .libs/ and a wrapper script beside it.
prog=$build/tests/helpers/.libs/local-brokers
[ -f "$prog" ] || prog=$build/tests/helpers/local-brokers

needed() {
  readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'
}

# $1 file, $2 name pattern, $3 yes (must be there) or no (must not)
expect() {
  if needed "$1" | grep -q "$2"; then found=yes; else found=no; fi
  if [ "$found" != "$3" ]; then
    if [ "$3" = yes ]; then what="does not need"; else what="needs"; fi
    echo "linked-libraries: $(basename "$1") $what $2;" \
      "it needs: $(needed "$1" | tr '\n' ' ')" >&2
    status=1
  fi
}

for f in "$lib" "$prog"; do
  expect "$f" '^libsoup' no
  expect "$f" '^libsystemd' no
  expect "$f" '^libjson-glib' no
  [ "$with_redis" = no ] && expect "$f" '^libhiredis' no
  [ "$with_sqlite" = no ] && expect "$f" '^libsqlite3' no
done
# What the library needs for the parts it has: proof the reading works.
expect "$lib" '^libglib-2\.0' yes
[ "$with_redis" = no ] || expect "$lib" '^libhiredis' yes
[ "$with_sqlite" = no ] || expect "$lib" '^libsqlite3' yes
expect "$prog" "^$dlname\$" yes

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
"$build/tests/helpers/local-brokers" memory >"$tmp/out" || status=1
if [ "$with_sqlite" != no ]; then
  "$build/tests/helpers/local-brokers" sqlite "$tmp" >>"$tmp/out" || status=1
fi
grep -q '^succeeded {"n":42}' "$tmp/out" || {
  echo "linked-libraries: the program's task did not succeed:" >&2
  cat "$tmp/out" >&2
  status=1
}
exit $status
