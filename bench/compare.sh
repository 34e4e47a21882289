#!/bin/bash
# compare.sh - Sluice's `sluice worker` command next to BullMQ and
# bee-queue, on one private Redis, in one run.
#
#   bench/compare.sh [--tasks N] [--rounds R] [--peer-concurrency C]
#                    [--tuned "WORKER OPTIONS"] [BUILD_DIR]
#
# Every system gets the same job: N no-op tasks (default 20,000) queued
# before its worker starts (the fill is not timed), then one worker process
# runs them all. Rounds (default 3) are interleaved: each round runs every
# system once, starting one system further along the list than the round
# before, so a busy minute on this shared machine does not land on one
# system only. Redis is flushed before each system.
#
# Systems:
#   bee-queue, bullmq   the peers at their default settings, except
#                       concurrency (--peer-concurrency, default 8, the
#                       tuned Sluice's); installed from bench/peers'
#                       lockfile with `npm ci`
#   sluice-*-defaults   `sluice worker --module demo.so` at the command's
#                       defaults (printed below), results on (demo.noop
#                       keeps the library default), reliable and fast
#   sluice-*-tuned      the same with --tuned (default -c 8 --prefetch 256
#                       --no-track-state)
#   sluice-fast-tuned-noresults  fast, tuned, results off by a message
#                       option: no peer does this, so it has no peer row
# Reliable + results is like-for-like with both peers (peer_match=
# like-for-like: they keep every finished job and recover what a dead
# worker held); fast + results keeps results but loses what a dead worker
# held (weaker-delivery); fast without results has no peer (no-peer).
#
# Output: one `compare system=... round=...` line per run, then per system
# the medians over the rounds (`compare-median`), each Sluice row against
# the best peer (`compare-ratio`), and issue 13's targets
# (`compare-target ... met=yes|no`). How each figure is taken: bench-cli.c,
# peers/common.js, docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."

tasks=20000
rounds=3
peer_concurrency=8
tuned="-c 8 --prefetch 256 --no-track-state"
build=_build
while [ $# -gt 0 ]; do
  case "$1" in
  --tasks) tasks=$2; shift 2 ;;
  --rounds) rounds=$2; shift 2 ;;
  --peer-concurrency) peer_concurrency=$2; shift 2 ;;
  --tuned) tuned=$2; shift 2 ;;
  -h | --help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
  -*) echo "compare.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  *) build=$1; shift ;;
  esac
done

sluice="$build/cli/sluice"
module="$build/examples/demo-module/.libs/demo.so"
benchcli="$build/bench/bench-cli"
bench="$build/bench/bench"
for f in "$sluice" "$module" "$benchcli" "$bench"; do
  [ -e "$f" ] || { echo "compare.sh: $f missing: build first (./dev.sh build)" >&2; exit 1; }
done
for tool in node npm; do
  command -v "$tool" >/dev/null ||
    { echo "compare.sh: $tool missing: install Node.js 20 or later (Debian: apt-get install nodejs npm)" >&2; exit 1; }
done

# The peers at the versions of the lockfile, installed once (again when
# the lockfile changes).
peers=bench/peers
if [ ! -f "$peers/node_modules/.sluice-stamp" ] ||
  [ "$peers/package-lock.json" -nt "$peers/node_modules/.sluice-stamp" ]; then
  echo "compare.sh: installing the peers (npm ci in $peers)" >&2
  (cd "$peers" && npm ci --no-audit --no-fund --loglevel=error >&2)
  touch "$peers/node_modules/.sluice-stamp"
fi

# The worker's defaults are whatever this build's command says they are.
unset SLUICE_URL SLUICE_MODE SLUICE_NAMESPACE SLUICE_CONFIG
help=$("$sluice" worker --help)
default_of() {
  sed -n "s/.*--$1=[^ ]*  *.*(default \([^)]*\)).*/\1/p" <<<"$help" | head -1
}
cli_concurrency=$(default_of concurrency)
cli_prefetch=$(default_of prefetch)
if grep -q -- '--no-track-state' <<<"$help"; then cli_track_state=on; else cli_track_state=off; fi

. bench/redis-server.sh
bench_redis_start compare.sh
port=$bench_redis_port
url=$bench_redis_url
log="$bench_redis_dir/workers.log"
lines="$bench_redis_dir/lines"
ns="cmp"

bench_machine_line compare
echo "compare setting tasks=$tasks rounds=$rounds peer_concurrency=$peer_concurrency node=$(node --version) peers=\"$(cd "$peers" && node -p "['bullmq','bee-queue','ioredis'].map(p => p + '@' + require(p + '/package.json').version).join(' ')")\""
echo "compare setting sluice_defaults=\"concurrency=$cli_concurrency prefetch=$cli_prefetch track_state=$cli_track_state results=on\" sluice_tuned=\"$tuned results=on\" sluice_commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

systems=(bee-queue bullmq sluice-reliable-defaults sluice-fast-defaults
  sluice-reliable-tuned sluice-fast-tuned sluice-fast-tuned-noresults)

fail() {
  echo "compare.sh: $1 failed; the last lines of the workers' log:" >&2
  tail -n 20 "$log" >&2
  exit 1
}

run_peer() { # SCRIPT SYSTEM ROUND
  node "$peers/$1.js" fill --port "$port" --tasks "$tasks" 2>>"$log" || fail "$2 fill"
  "$benchcli" --op command --url "$url" --tasks "$tasks" --log "$log" \
    --label "compare system=$2 round=$3 settings=defaults" -- \
    node "$peers/$1.js" work --port "$port" --tasks "$tasks" \
    --concurrency "$peer_concurrency" || fail "$2"
}

run_sluice() { # SYSTEM ROUND MODE SETTINGS RESULTS [WORKER OPTIONS...]
  local system=$1 round=$2 mode=$3 which=$4 results=$5 desc
  shift 5
  if [ "$which" = defaults ]; then
    desc="concurrency=$cli_concurrency prefetch=$cli_prefetch track_state=$cli_track_state"
  else
    desc="worker_options=\"$*\""
  fi
  "$benchcli" --op process --url "$url" --mode "$mode" --namespace "$ns" \
    --tasks "$tasks" --results "$results" --log "$log" \
    --label "compare system=$system round=$round settings=$which $desc" -- \
    "$sluice" worker --module "$module" --url "$url" --mode "$mode" \
    --namespace "$ns" "$@" || fail "$system"
}

# shellcheck disable=SC2086 # $tuned is a list of options
run_system() { # SYSTEM ROUND
  redis-cli -p "$port" flushall >/dev/null
  case "$1" in
  bee-queue) run_peer bee "$1" "$2" ;;
  bullmq) run_peer bullmq "$1" "$2" ;;
  sluice-reliable-defaults) run_sluice "$1" "$2" reliable defaults on ;;
  sluice-fast-defaults) run_sluice "$1" "$2" fast defaults on ;;
  sluice-reliable-tuned) run_sluice "$1" "$2" reliable tuned on $tuned ;;
  sluice-fast-tuned) run_sluice "$1" "$2" fast tuned on $tuned ;;
  sluice-fast-tuned-noresults) run_sluice "$1" "$2" fast tuned off $tuned ;;
  esac
}

for round in $(seq 1 "$rounds"); do
  n=${#systems[@]}
  for i in $(seq 0 $((n - 1))); do
    run_system "${systems[$(((i + round - 1) % n))]}" "$round" | tee -a "$lines"
  done
  # A single enqueue, timed call by call: the library's client with its
  # defaults, one thread.
  for broker in redis-reliable redis-fast; do
    redis-cli -p "$port" flushall >/dev/null
    "$bench" --broker "$broker" --url "$url" --op enqueue --tasks 5000 |
      sed "s/^bench /compare system=sluice-enqueue-${broker#redis-} round=$round /" |
      tee -a "$lines"
  done
done

awk -v rounds="$rounds" '
  function field(line, key,    m) {
    if (match(line, " " key "=[^ ]+")) return substr(line, RSTART + length(key) + 2, RLENGTH - length(key) - 2)
    return ""
  }
  function median(list,    a, n, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  /^compare system=/ {
    s = field($0, "system")
    if (!(s in seen)) { seen[s] = 1; order[++ns] = s }
    split("rate_per_s redis_cpu_us_per_task worker_cpu_us_per_task redis_cmds_per_task rss_mb p50_us p99_us", keys, " ")
    for (k in keys) { v = field($0, keys[k]); if (v != "") vals[s, keys[k]] = vals[s, keys[k]] " " v }
    settings[s] = field($0, "settings")
  }
  END {
    for (i = 1; i <= ns; i++) {
      s = order[i]; out = "compare-median system=" s " rounds=" rounds
      if (settings[s] != "") out = out " settings=" settings[s]
      for (k = 1; k <= 7; k++) if ((s, keys[k]) in vals) {
        med[s, keys[k]] = median(vals[s, keys[k]])
        out = out sprintf(" %s=%s", keys[k], med[s, keys[k]])
      }
      print out
    }
    best_rate = 0; best_cpu = 0
    for (i = 1; i <= ns; i++) {
      s = order[i]
      if (s !~ /^sluice/) {
        if (med[s, "rate_per_s"] > best_rate) { best_rate = med[s, "rate_per_s"]; best_rate_of = s }
        if (best_cpu == 0 || med[s, "redis_cpu_us_per_task"] < best_cpu) { best_cpu = med[s, "redis_cpu_us_per_task"]; best_cpu_of = s }
      }
    }
    if (best_rate == 0) exit
    for (i = 1; i <= ns; i++) {
      s = order[i]
      if (s !~ /^sluice/ || s ~ /enqueue/) continue
      printf "compare-ratio system=%s peer_match=%s rate_x_best_peer=%.2f best_peer_rate=%s redis_cpu_x_best_peer=%.2f best_peer_redis_cpu=%s\n", s,
        s ~ /noresults/ ? "no-peer" : (s ~ /reliable/ ? "like-for-like" : "weaker-delivery"),
        med[s, "rate_per_s"] / best_rate, best_rate_of, med[s, "redis_cpu_us_per_task"] / best_cpu, best_cpu_of
    }
    target("defaults_vs_tuned_reliable", med["sluice-reliable-defaults", "rate_per_s"] / med["sluice-reliable-tuned", "rate_per_s"], ">=", 0.70)
    target("defaults_vs_tuned_fast", med["sluice-fast-defaults", "rate_per_s"] / med["sluice-fast-tuned", "rate_per_s"], ">=", 0.70)
    target("reliable_defaults_x_best_peer", med["sluice-reliable-defaults", "rate_per_s"] / best_rate, ">=", 10)
    target("reliable_defaults_redis_cpu_us", med["sluice-reliable-defaults", "redis_cpu_us_per_task"], "<=", 10)
    target("fast_defaults_x_best_peer", med["sluice-fast-defaults", "rate_per_s"] / best_rate, ">=", 15)
    target("enqueue_reliable_cmds", med["sluice-enqueue-reliable", "redis_cmds_per_task"], "<=", 1.01)
    target("enqueue_fast_cmds", med["sluice-enqueue-fast", "redis_cmds_per_task"], "<=", 1.01)
    target("enqueue_reliable_p50_us", med["sluice-enqueue-reliable", "p50_us"], "<", 40)
    target("enqueue_fast_p50_us", med["sluice-enqueue-fast", "p50_us"], "<", 40)
  }
  function target(name, v, op, goal,    met) {
    met = (op == ">=" && v >= goal) || (op == "<=" && v <= goal) || (op == "<" && v < goal)
    printf "compare-target name=%s measured=%.2f goal=\"%s %s\" met=%s\n", name, v, op, goal, met ? "yes" : "no"
  }
' "$lines"
