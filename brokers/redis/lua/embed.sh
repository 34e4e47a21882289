#!/bin/sh
# embed.sh [--prefix PREFIX] [--list NAME] DIR FILE... - writes to standard
# output one C array per file of DIR, named PREFIX (by default
# sluice_redis_lua__) and the file's path with its extension dropped and
# every "/", "-" and "." as "_" (reliable/fetch.lua is
# sluice_redis_lua__reliable_fetch), holding the file byte for byte. With
# --list, also NAME[]: each file's path and its array, in the order given,
# then NULL, for code that walks every file (the SQLite migrations, the
# Redis scripts' set version).
#
# The build runs it to compile the Redis scripts into the library
# (brokers/redis/redis-lua.c includes the output), so the C broker runs
# exactly the files the other clients ship, and nothing reads them at run
# time; and the SQLite migrations (brokers/sqlite/migrations/) likewise.
# Every file must end with a newline.
set -eu
prefix=sluice_redis_lua__
list=
while [ $# -gt 0 ]; do
  case $1 in
  --prefix) prefix=$2; shift 2 ;;
  --list) list=$2; shift 2 ;;
  *) break ;;
  esac
done
dir=$1
shift
echo "/* Generated from $(basename "$dir")/ by embed.sh: edit the files there. */"
for f in "$@"; do
  name=$(printf '%s' "${f%.*}" | tr '/.-' '___')
  if [ -n "$(tail -c 1 "$dir/$f")" ]; then
    echo "embed.sh: $dir/$f does not end with a newline" >&2
    exit 1
  fi
  echo "const gchar $prefix$name[] ="
  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/    "/' -e 's/$/\\n"/' "$dir/$f"
  echo "    ;"
done
if [ -n "$list" ]; then
  echo "const gchar *const $list[] = {"
  for f in "$@"; do
    name=$(printf '%s' "${f%.*}" | tr '/.-' '___')
    echo "    \"$f\", $prefix$name,"
  done
  echo "    NULL};"
fi
