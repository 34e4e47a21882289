#!/bin/bash
# cluster.sh - Sluice on a Redis Cluster: throughput and Redis CPU per task,
# per master, with 1 and with 3 masters.
#
#   bench/cluster.sh [BUILD_DIR]      (TASKS=N, BROKER=redis-reliable|redis-fast)
#
# It starts its own cluster nodes (redis-server --cluster-enabled yes, free
# loopback ports, a directory each, persistence off, no replicas: the
# figures measure the masters), joins them (CLUSTER ADDSLOTSRANGE for one
# master, redis-cli --cluster create for three), and runs `bench/bench --op
# process` through redis+cluster:// URLs:
#
#   masters=0 namespaces=1   one Redis, not a cluster, through redis://
#   masters=1 namespaces=1   a cluster of one master
#   masters=3 namespaces=1   one namespace is one slot: one master does all
#   masters=3 namespaces=3   three namespaces chosen so that each one's slot
#                            is on a different master, run at once
#   masters=3 namespaces=1 partitions=12
#                            one namespace split in 12 partitions
#                            (?partitions=12); the line says how many
#                            partitions each master serves
#                            (masterN_partitions: 4 each, as the tags
#                            cover the slot space evenly) and how far the
#                            master furthest from the mean is
#                            (worst_share_off_mean)
#
# Each run prints one key=value line: the summed rate of its bench
# processes, the Redis CPU per task of each master (INFO cpu used_cpu_sys +
# used_cpu_user, before and after) and each master's share of the Redis CPU
# (1.00 = all of it). The nodes are stopped by their pids when the script
# exits, however it exits.
set -euo pipefail

build=${1:-_build}
tasks=${TASKS:-50000}
broker=${BROKER:-redis-reliable}
bench=$build/bench/bench
[ -x "$bench" ] || { echo "cluster.sh: build first ($bench missing)" >&2; exit 1; }
command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
  { echo "cluster.sh: redis-server and redis-cli needed" >&2; exit 1; }

# shellcheck source=bench/redis-server.sh
. "$(dirname "$0")/redis-server.sh"

node_pids=()
node_ports=()
work=$(mktemp -d)

cluster_cleanup() {
  for pid in "${node_pids[@]}"; do
    kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  node_pids=()
  node_ports=()
  return 0
}
trap 'cluster_cleanup; bench_redis_cleanup; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_node() {
  local port bus dir pid
  port=$(free_port)
  bus=$(free_port)
  dir=$(mktemp -d -p "$work")
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save '' \
    --appendonly no --logfile "$dir/redis.log" --daemonize no \
    --cluster-enabled yes --cluster-port "$bus" \
    --cluster-config-file "$dir/nodes.conf" &
  pid=$!
  for _ in $(seq 1 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  node_pids+=("$pid")
  node_ports+=("$port")
}

wait_cluster_ok() {
  for _ in $(seq 1 600); do
    local ok=1
    for p in "${node_ports[@]}"; do
      redis-cli -p "$p" cluster info | grep -q 'cluster_state:ok' || ok=0
    done
    [ $ok = 1 ] && return 0
    sleep 0.1
  done
  echo "cluster.sh: the cluster did not become ok" >&2
  exit 1
}

start_cluster() {
  local masters=$1 args=()
  for _ in $(seq 1 "$masters"); do start_node; done
  if [ "$masters" = 1 ]; then
    redis-cli -p "${node_ports[0]}" cluster addslotsrange 0 16383 >/dev/null
  else
    for p in "${node_ports[@]}"; do args+=("127.0.0.1:$p"); done
    redis-cli --cluster create "${args[@]}" --cluster-yes >/dev/null
  fi
  wait_cluster_ok
}

# The port of the master that serves slot $1.
owner_port() {
  local slot=$1 p range lo hi
  for p in "${node_ports[@]}"; do
    for range in $(redis-cli -p "$p" cluster nodes | grep myself | cut -d' ' -f9-); do
      lo=${range%-*}
      hi=${range#*-}
      if [ "$slot" -ge "$lo" ] && [ "$slot" -le "$hi" ]; then
        echo "$p"
        return
      fi
    done
  done
}

# $1 namespaces, each on a different master (as far as there are masters).
pick_namespaces() {
  local want=$1 n=0 i=0 name slot port used=" "
  while [ $n -lt "$want" ]; do
    name="bench$i"
    # bench/bench works in "<namespace>-process-off" (its begin_op()).
    slot=$(redis-cli -p "${node_ports[0]}" cluster keyslot "{$name-process-off}")
    port=$(owner_port "$slot")
    if [[ "$used" != *" $port "* ]] || [ ${#node_ports[@]} -lt "$want" ]; then
      echo "$name"
      used="$used$port "
      n=$((n + 1))
    fi
    i=$((i + 1))
  done
}

cpu_of() {
  redis-cli -p "$1" info cpu |
    awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.6f", s }'
}

# The slots of the $2 partitions of namespace $1, one a line: the tag
# brokers/redis/redis-keys.c picks ({ns#k}, else {ns#k.j}, inside the k-th
# 1/n of the slot space), with CRC16 (XMODEM) as Redis computes it.
partition_slots() {
  python3 - "$1" "$2" <<'PY'
import sys
def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc
ns, n = sys.argv[1], int(sys.argv[2])
for k in range(n):
    lo, hi = (k * 16384 + n - 1) // n, (k + 1) * 16384 // n
    j = 0
    while True:
        tag = f"{ns}#{k}" if j == 0 else f"{ns}#{k}.{j}"
        slot = crc16(tag.encode()) % 16384
        if lo <= slot < hi or j == 100000:
            print(slot)
            break
        j += 1
PY
}

# How many of the $2 partitions of namespace $1 each master serves, as
# "a b c" in the order of node_ports.
partitions_per_master() {
  local ns=$1 n=$2 slot port i
  local -a count=()
  for i in "${!node_ports[@]}"; do count[$i]=0; done
  for slot in $(partition_slots "$ns-process-off" "$n"); do
    port=$(owner_port "$slot")
    for i in "${!node_ports[@]}"; do
      [ "${node_ports[$i]}" = "$port" ] && count[$i]=$((count[$i] + 1))
    done
  done
  echo "${count[@]}"
}

# One namespace of $2 partitions on $1 masters, named $3.
run_partitioned() {
  local masters=$1 n=$2 ns=$3 url sep="" line rate counts split
  local -a before=() after=()
  start_cluster "$masters"
  url="redis+cluster://"
  for p in "${node_ports[@]}"; do url="$url${sep}127.0.0.1:$p"; sep=","; done
  counts=$(partitions_per_master "$ns" "$n")
  split=uneven
  [ "$(echo "$counts" | tr ' ' '\n' | sort -u | wc -l)" = 1 ] && split=even
  for i in "${!node_ports[@]}"; do before[$i]=$(cpu_of "${node_ports[$i]}"); done
  "$bench" --broker "$broker" --url "$url?partitions=$n" --namespace "$ns" \
    --op process --results off --tasks "$tasks" >"$work/$ns.out" 2>"$work/$ns.err"
  for i in "${!node_ports[@]}"; do after[$i]=$(cpu_of "${node_ports[$i]}"); done
  rate=$(grep -o 'rate_per_s=[0-9.]*' "$work/$ns.out" | head -1 | cut -d= -f2)
  line="cluster broker=$broker masters=$masters namespaces=1 partitions=$n split=$split tasks_per_namespace=$tasks rate_per_s=${rate:-0}"
  line=$line$(
    for i in "${!node_ports[@]}"; do echo "${before[$i]} ${after[$i]}"; done |
      awk -v tasks="$tasks" -v counts="$counts" '
        BEGIN { split(counts, c, " ") }
        { d[NR] = $2 - $1; sum += d[NR] }
        END {
          for (i = 1; i <= NR; i++) {
            share = sum > 0 ? d[i] / sum : 0
            dev = NR * share - 1
            if (dev < 0) dev = -dev
            if (dev > worst) worst = dev
            printf " master%d_partitions=%d master%d_cpu_us_per_task=%.2f master%d_share=%.2f", i, c[i], i, d[i] * 1e6 / tasks, i, share
          }
          printf " redis_cpu_us_per_task=%.2f worst_share_off_mean=%.0f%%", sum * 1e6 / tasks, worst * 100
        }')
  echo "$line"
  cluster_cleanup
}

run() {
  local masters=$1 namespaces=$2 url sep="" ns line rate total_rate=0
  local -a before=() after=() bench_pids=() names=()
  start_cluster "$masters"
  url="redis+cluster://"
  for p in "${node_ports[@]}"; do url="$url${sep}127.0.0.1:$p"; sep=","; done
  mapfile -t names < <(pick_namespaces "$namespaces")
  for i in "${!node_ports[@]}"; do before[$i]=$(cpu_of "${node_ports[$i]}"); done
  for ns in "${names[@]}"; do
    "$bench" --broker "$broker" --url "$url" --namespace "$ns" --op process \
      --results off --tasks "$tasks" >"$work/$ns.out" 2>"$work/$ns.err" &
    bench_pids+=($!)
  done
  for pid in "${bench_pids[@]}"; do wait "$pid"; done
  for i in "${!node_ports[@]}"; do after[$i]=$(cpu_of "${node_ports[$i]}"); done
  for ns in "${names[@]}"; do
    rate=$(grep -o 'rate_per_s=[0-9.]*' "$work/$ns.out" | head -1 | cut -d= -f2)
    total_rate=$(awk -v a="$total_rate" -v b="${rate:-0}" 'BEGIN { print a + b }')
  done
  line="cluster broker=$broker masters=$masters namespaces=$namespaces tasks_per_namespace=$tasks rate_per_s=$total_rate"
  line=$line$(
    for i in "${!node_ports[@]}"; do echo "${before[$i]} ${after[$i]}"; done |
      awk -v tasks=$((tasks * namespaces)) '
        { d[NR] = $2 - $1; sum += d[NR] }
        END {
          for (i = 1; i <= NR; i++)
            printf " master%d_cpu_us_per_task=%.2f master%d_share=%.2f", i, d[i] * 1e6 / tasks, i, (sum > 0 ? d[i] / sum : 0)
          printf " redis_cpu_us_per_task=%.2f", sum * 1e6 / tasks
        }')
  echo "$line"
  cluster_cleanup
}

# The same work on one Redis without cluster mode, through redis://: what
# the routing costs.
run_plain() {
  local before after
  bench_redis_start cluster.sh
  trap 'cluster_cleanup; bench_redis_cleanup; rm -rf "$work"' EXIT
  before=$(cpu_of "$bench_redis_port")
  "$bench" --broker "$broker" --url "$bench_redis_url" --namespace plain \
    --op process --results off --tasks "$tasks" >"$work/plain.out" 2>&1
  after=$(cpu_of "$bench_redis_port")
  echo "cluster broker=$broker masters=0 namespaces=1 tasks_per_namespace=$tasks rate_per_s=$(grep -o 'rate_per_s=[0-9.]*' "$work/plain.out" | head -1 | cut -d= -f2)$(awk -v a="$before" -v b="$after" -v t="$tasks" 'BEGIN { printf " redis_cpu_us_per_task=%.2f", (b - a) * 1e6 / t }')"
  bench_redis_cleanup
  bench_redis_pid=
  bench_redis_dir=
}

bench_machine_line cluster
if [ "${ONLY_PARTITIONS:-}" != 1 ]; then
  run_plain
  run 1 1
  run 3 1
  run 3 3
fi
run_partitioned 3 12 part0
run_partitioned 3 12 part1
