#!/bin/sh
# api-versions.sh - the headers' availability markers agree with the
# version configure.ac names: no SLUICE_AVAILABLE_IN_x_y, "(since x.y)" or
# "Since: x.y" newer than it, a macro for every marker used, and
# SLUICE_VERSION_MAJOR/MINOR/MICRO equal to it. (Nothing is released yet:
# everything is 0.1.)
set -u
src=${SLUICE_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
version=$(sed -n 's/^AC_INIT(\[sluice\], \[\([0-9.]*\)\].*/\1/p' "$src/configure.ac")
status=0
fail() {
  echo "api-versions: $*" >&2
  status=1
}
[ -n "$version" ] || { echo "api-versions: no version in configure.ac" >&2; exit 1; }
major=${version%%.*}
rest=${version#*.}
minor=${rest%%.*}
micro=${rest#*.}
macros=$src/include/sluice/sluice-macros.h
for part in MAJOR:$major MINOR:$minor MICRO:$micro; do
  name=${part%%:*}
  want=${part#*:}
  got=$(sed -n "s/^#define SLUICE_VERSION_$name \([0-9]*\)\$/\1/p" "$macros")
  [ "$got" = "$want" ] || fail "SLUICE_VERSION_$name is ${got:-missing}, configure.ac says $version"
done
# Is $1.$2 newer than the version?
newer() {
  [ "$1" -gt "$major" ] || { [ "$1" -eq "$major" ] && [ "$2" -gt "$minor" ]; }
}
headers=$(find "$src/include/sluice" -name '*.h' | sort)
for h in $headers; do
  grep -o 'SLUICE_AVAILABLE_IN_[0-9]*_[0-9]*' "$h" | sort -u | while read -r m; do
    v=${m#SLUICE_AVAILABLE_IN_}
    if newer "${v%_*}" "${v#*_}"; then
      echo "api-versions: $h uses $m in a $version library: use SLUICE_AVAILABLE_IN_${major}_${minor}" >&2
      echo x
    elif ! grep -q "^#define $m " "$macros"; then
      echo "api-versions: $h uses $m, which sluice-macros.h does not define" >&2
      echo x
    fi
  done | grep -q x && status=1
  grep -oE '\((since|Since:?) [0-9]+\.[0-9]+\)|Since: [0-9]+\.[0-9]+' "$h" | sort -u | while read -r note; do
    v=$(echo "$note" | grep -oE '[0-9]+\.[0-9]+')
    if newer "${v%.*}" "${v#*.}"; then
      echo "api-versions: $h says \"$note\" in a $version library" >&2
      echo x
    fi
  done | grep -q x && status=1
done
[ $status -eq 0 ] && echo "api-versions: every marker agrees with $version"
exit $status
