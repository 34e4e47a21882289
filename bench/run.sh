#!/bin/bash
# run.sh - the full benchmark: every broker, against a redis-server of its
# own, next to the raw limit of that Redis for the same command mix.
#
#   bench/run.sh [BUILD_DIR]        (default: _build, as ./dev.sh builds)
#
# It starts redis-server on a free loopback port with its own directory
# (persistence off, so the figures measure Sluice, not the disk), runs
# bench/bench for memory, redis-fast and redis-reliable, measures the same
# server with redis-benchmark -P 16, prints one key=value line per figure,
# then each Redis broker's processing rate as a fraction of the limit, and
# stops the server by its pid.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-_build}
bench="$build/bench/bench"
[ -x "$bench" ] || { echo "run.sh: build first (./dev.sh build)" >&2; exit 1; }
command -v redis-benchmark >/dev/null || { echo "run.sh: redis-benchmark missing (apt-get install redis-tools)" >&2; exit 1; }

dir=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM

# A free port: try random ones until a server starts on one.
for try in $(seq 1 20); do
  port=$((20000 + RANDOM % 40000))
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save '' \
    --appendonly no --logfile "$dir/redis.log" --daemonize no &
  pid=$!
  for i in $(seq 1 50); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  wait "$pid" 2>/dev/null || true
  pid=
done
[ -n "$pid" ] || { echo "run.sh: could not start redis-server" >&2; exit 1; }
url="redis://127.0.0.1:$port/0"

echo "bench setting machine=\"$(uname -m) $(nproc) cpus $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')\" redis=\"$(redis-server --version | cut -d' ' -f3)\""

out="$dir/lines"
"$bench" --broker memory | tee -a "$out"
for broker in redis-fast redis-reliable; do
  redis-cli -p "$port" flushall >/dev/null
  "$bench" --broker "$broker" --url "$url" | tee -a "$out"
done

# The raw limit of this server, pipelined 16 deep, 50 clients.
limit() {
  redis-cli -p "$port" flushall >/dev/null
  redis-benchmark -p "$port" -P 16 -n 1000000 --csv "$@" 2>/dev/null |
    awk -F'","' 'NR == 2 {print $2}'
}
lpush=$(limit -t lpush)
rpop=$(limit -t rpop)
xadd=$(limit XADD bench:stream '*' f v)
echo "bench op=redis-limit cmd=LPUSH pipeline=16 rate_per_s=$lpush"
echo "bench op=redis-limit cmd=RPOP pipeline=16 rate_per_s=$rpop"
echo "bench op=redis-limit cmd=XADD pipeline=16 rate_per_s=$xadd"

# One fast-mode task needs at least an LPUSH and a pop; one reliable-mode
# task at least an XADD and about as much again to read and acknowledge it.
awk -v lpush="$lpush" -v rpop="$rpop" -v xadd="$xadd" '
  /op=process/ {
    split($0, f, " "); broker = ""; results = ""; rate = 0
    for (i in f) {
      if (f[i] ~ /^broker=/) broker = substr(f[i], 8)
      if (f[i] ~ /^results=/) results = substr(f[i], 9)
      if (f[i] ~ /^rate_per_s=/) rate = substr(f[i], 12)
    }
    if (broker == "redis-fast") lim = 1 / (1 / lpush + 1 / rpop)
    else if (broker == "redis-reliable") lim = xadd / 2
    else next
    printf "bench broker=%s op=fraction-of-limit results=%s limit_per_s=%.0f fraction=%.3f\n", broker, results, lim, rate / lim
  }' "$out"
