#!/bin/bash
# stress.sh - the whole test suite, several times in a row, on a machine
# whose cores are all busy.
#
#   tests/stress.sh [ROUNDS]        (default 5)
#
# A user's machine is often busy: a test that only passes on an idle one
# depends on scheduling luck. This starts one CPU hog per core (plain shell
# busy loops, at the same priority as the tests), runs the README's test
# command (./dev.sh test) ROUNDS times, and stops the hogs by their pids.
# It fails if any round fails, and says which.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
cores=$(nproc 2>/dev/null || echo 2)
hogs=()

stop_hogs() {
  for pid in "${hogs[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${hogs[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  hogs=()
}
trap stop_hogs EXIT INT TERM

# Build first, without the hogs: compiling under load proves nothing.
./dev.sh build

for _ in $(seq 1 "$cores"); do
  bash -c 'while :; do :; done' &
  hogs+=("$!")
done
echo "stress.sh: ${#hogs[@]} CPU hogs running (pids ${hogs[*]}); $rounds rounds"

failed=()
for round in $(seq 1 "$rounds"); do
  start=$(date +%s)
  if ./dev.sh test >"${TMPDIR:-/tmp}/sluice-stress-$round.log" 2>&1; then
    echo "stress.sh: round $round passed in $(($(date +%s) - start)) s"
  else
    echo "stress.sh: round $round FAILED in $(($(date +%s) - start)) s; log: ${TMPDIR:-/tmp}/sluice-stress-$round.log"
    grep -E '^(FAIL|ERROR):' "${TMPDIR:-/tmp}/sluice-stress-$round.log" || true
    # The next round writes the same test logs again: keep this round's
    # logs of the failed programs, whole, to read what failed and why.
    keep="${TMPDIR:-/tmp}/sluice-stress-$round"
    mkdir -p "$keep"
    sed -n -E 's/^(FAIL|ERROR): (.*)$/\2/p' \
      "${TMPDIR:-/tmp}/sluice-stress-$round.log" | while read -r test; do
      cp "_build/$test.log" "$keep/" 2>/dev/null || true
    done
    echo "stress.sh: the failed programs' logs are in $keep"
    failed+=("$round")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "stress.sh: rounds ${failed[*]} of $rounds failed" >&2
  exit 1
fi
echo "stress.sh: all $rounds rounds passed under load"
