#!/bin/sh
# embed.sh LUADIR FILE... - writes to standard output one C array per Lua
# file of LUADIR, named sluice_redis_lua__ and the file's path with every
# "/", "-" and "." as "_" and ".lua" dropped (reliable/fetch.lua is
# sluice_redis_lua__reliable_fetch), holding the file byte for byte.
#
# The build runs it to compile the scripts into the library
# (brokers/redis/redis-lua.c includes the output), so the C broker runs
# exactly the files the other clients ship, and nothing reads them at run
# time. Every file must end with a newline.
set -eu
dir=$1
shift
echo "/* Generated from brokers/redis/lua/ by embed.sh: edit the .lua files. */"
for f in "$@"; do
  name=$(printf '%s' "${f%.lua}" | tr '/.-' '___')
  if [ -n "$(tail -c 1 "$dir/$f")" ]; then
    echo "embed.sh: $dir/$f does not end with a newline" >&2
    exit 1
  fi
  echo "const gchar sluice_redis_lua__$name[] ="
  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/    "/' -e 's/$/\\n"/' "$dir/$f"
  echo "    ;"
done
