#!/bin/bash
# run.sh - the full benchmark: every broker, against a redis-server of its
# own, next to the raw cost of that Redis for the commands Sluice sends,
# and the cost of process isolation on each broker.
#
#   bench/run.sh [--scale] [--worker-options "OPTIONS"] [BUILD_DIR]
#
# It starts redis-server on a free loopback port with its own directory
# (persistence off, so the figures measure Sluice, not the disk), runs
# bench/bench for memory, sqlite (synchronous normal and full, each on
# fresh database files in a temporary directory of its own, and its
# latency with the worker in another process), redis-fast and
# redis-reliable, measures the
# Redis CPU one raw pipelined command costs on the same server
# (redis-benchmark -P 16), prints one key=value line per figure, then each
# Redis broker's processing rate as a fraction of the limit its own command
# count sets (below), and stops the server by its pid. A few minutes.
#
# --scale adds the larger runs of the `sluice worker` command (bench-cli):
# payloads of 100 B, 10 KB and 100 KB; 1, 10 and 50 queues; 1, 2 and 4
# worker processes; a backlog of 1,000,000 tasks; 1,000,000 delayed tasks
# all due at once; each in both modes. About 5 minutes on 2 cores. The
# worker runs at the command's defaults unless --worker-options says
# otherwise.
#
# The limit. A process run reports redis_cmds_per_task: every command
# Redis executed for it (INFO commandstats, commands run by scripts
# included) per task. Redis runs commands one at a time on one core, so
# the most tasks per second it could serve is
#     limit = 1e6 / (redis_cmds_per_task * raw_cpu_us_per_cmd)
# where raw_cpu_us_per_cmd is the Redis CPU of one command when they come
# pipelined 16 deep (INFO cpu over a redis-benchmark run of LPUSH, RPOP,
# XADD and SET, averaged). fraction = rate / limit says how close Sluice
# runs to what its own command count allows; redis_cpu_x_raw =
# redis_cpu_us_per_task / (redis_cmds_per_task * raw_cpu_us_per_cmd) says
# how much more each of its commands costs than a raw one (scripts,
# larger arguments, multi-message reads), and redis_saturation_per_s =
# 1e6 / redis_cpu_us_per_task is the rate at which this run's real Redis
# CPU per task would fill one core. docs/performance.md says why.
set -euo pipefail
cd "$(dirname "$0")/.."
scale=
worker_options=
build=_build
while [ $# -gt 0 ]; do
  case "$1" in
  --scale) scale=1; shift ;;
  --worker-options) worker_options=$2; shift 2 ;;
  -h | --help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
  -*) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  *) build=$1; shift ;;
  esac
done
bench="$build/bench/bench"
benchcli="$build/bench/bench-cli"
sluice="$build/cli/sluice"
module="$build/examples/demo-module/.libs/demo.so"
for f in "$bench" "$benchcli" "$sluice" "$module"; do
  [ -e "$f" ] || { echo "run.sh: $f missing: build first (./dev.sh build)" >&2; exit 1; }
done
command -v redis-benchmark >/dev/null || { echo "run.sh: redis-benchmark missing (apt-get install redis-tools)" >&2; exit 1; }
unset SLUICE_URL SLUICE_MODE SLUICE_NAMESPACE SLUICE_CONFIG

. bench/redis-server.sh
bench_redis_start run.sh
port=$bench_redis_port
url=$bench_redis_url
out="$bench_redis_dir/lines"
log="$bench_redis_dir/workers.log"

bench_machine_line bench

"$bench" --broker memory | tee -a "$out"
for sync in normal full; do
  "$bench" --broker sqlite --synchronous "$sync" | tee -a "$out"
  "$bench" --broker sqlite --synchronous "$sync" --op latency \
    --worker-process | tee -a "$out"
done
for broker in redis-fast redis-reliable; do
  redis-cli -p "$port" flushall >/dev/null
  "$bench" --broker "$broker" --url "$url" | tee -a "$out"
done

# Process isolation against thread isolation: the cost of a child round
# trip per no-op task, on each broker (child_cpu_us_per_task is the CPU of
# the children, beside the worker's own).
for broker in memory redis-fast redis-reliable; do
  for isolation in thread process; do
    redis-cli -p "$port" flushall >/dev/null
    "$bench" --broker "$broker" --url "$url" --op process --results off \
      --tasks 100000 --isolation "$isolation" | tee -a "$out"
  done
done

# Redis CPU per raw command: INFO's CPU and call counters around a
# pipelined redis-benchmark run of one command (the calls include a few
# INFO and CONFIG calls of redis-benchmark and this script: noise of 1 in
# 100,000).
redis_cpu() {
  redis-cli -p "$port" info cpu | tr -d '\r' |
    awk -F: '$1 == "used_cpu_sys" || $1 == "used_cpu_user" { s += $2 } END { printf "%.6f\n", s }'
}
redis_calls() {
  redis-cli -p "$port" info commandstats | tr -d '\r' |
    awk -F'[=,]' '/^cmdstat_/ { c += $2 } END { print c }'
}
raw() { # NAME ARGS...: prints the line for one command
  local name=$1 cpu0 cpu1 calls0 calls1 rate
  shift
  redis-cli -p "$port" flushall >/dev/null
  cpu0=$(redis_cpu)
  calls0=$(redis_calls)
  rate=$(redis-benchmark -p "$port" -P 16 -n 1000000 --csv "$@" 2>/dev/null |
    awk -F'","' 'NR == 2 {print $2}')
  cpu1=$(redis_cpu)
  calls1=$(redis_calls)
  awk -v name="$name" -v rate="$rate" -v cpu0="$cpu0" -v cpu1="$cpu1" \
    -v calls="$((calls1 - calls0))" 'BEGIN {
      printf "bench op=redis-raw cmd=%s pipeline=16 rate_per_s=%s cpu_us_per_cmd=%.3f\n", name, rate, (cpu1 - cpu0) * 1e6 / calls }'
}
{
  raw LPUSH -t lpush
  raw RPOP -t rpop
  raw XADD XADD bench:stream '*' f v
  raw SET -t set
} | tee -a "$out"

awk '
  function field(line, key) {
    if (match(line, " " key "=[^ ]+")) return substr(line, RSTART + length(key) + 2, RLENGTH - length(key) - 2)
    return ""
  }
  /op=redis-raw/ { raw += field($0, "cpu_us_per_cmd"); nraw++ }
  /op=process/ && / broker=redis-/ { lines[++n] = $0 }
  END {
    raw /= nraw
    printf "bench op=redis-raw cmd=mean raw_cpu_us_per_cmd=%.3f\n", raw
    for (i = 1; i <= n; i++) {
      l = lines[i]; cmds = field(l, "redis_cmds_per_task"); cpu = field(l, "redis_cpu_us_per_task")
      lim = 1e6 / (cmds * raw)
      printf "bench broker=%s op=fraction-of-limit results=%s redis_cmds_per_task=%s limit_per_s=%.0f fraction=%.3f redis_cpu_x_raw=%.1f redis_saturation_per_s=%.0f\n",
        field(l, "broker"), field(l, "results"), cmds, lim, field(l, "rate_per_s") / lim, cpu / (cmds * raw), 1e6 / cpu
    }
  }' "$out"

[ -n "$scale" ] || exit 0

# ---- The larger runs, with the real worker command --------------------------
# shellcheck disable=SC2086 # $worker_options is a list of options
scale_run() { # MODE BENCH-CLI OPTIONS...
  local mode=$1
  shift
  redis-cli -p "$port" flushall >/dev/null
  "$benchcli" --url "$url" --mode "$mode" --namespace scale --log "$log" \
    --label "bench tool=sluice-worker worker_options=\"${worker_options:-defaults}\"" "$@" -- \
    "$sluice" worker --module "$module" --url "$url" --mode "$mode" \
    --namespace scale $worker_options ||
    { echo "run.sh: bench-cli failed; the workers' log ends:" >&2; tail -n 20 "$log" >&2; exit 1; }
}
for mode in reliable fast; do
  scale_run "$mode" --tasks 20000 --payload-bytes 100
  scale_run "$mode" --tasks 20000 --payload-bytes 10000
  scale_run "$mode" --tasks 5000 --payload-bytes 100000
  for q in 1 10 50; do scale_run "$mode" --tasks 20000 --queues "$q"; done
  for w in 1 2 4; do scale_run "$mode" --tasks 20000 --workers "$w"; done
  scale_run "$mode" --tasks 1000000
  scale_run "$mode" --op delayed --tasks 1000000
done
