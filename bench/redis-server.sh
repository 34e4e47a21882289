# shellcheck shell=bash disable=SC2034 # sets variables for the script that sources it
# redis-server.sh - sourced by bench/run.sh and bench/compare.sh: starts one
# private redis-server for the benchmark and stops it by its pid.
#
#   . bench/redis-server.sh
#   bench_redis_start NAME    # sets bench_redis_port, bench_redis_url,
#                             # bench_redis_dir; installs the EXIT trap
#
# The server listens on a free loopback port with a directory of its own,
# persistence off (so the figures measure the queues, not the disk), and is
# stopped by its pid when the script exits, however it exits.

bench_redis_pid=
bench_redis_dir=

bench_redis_cleanup() {
  if [ -n "$bench_redis_pid" ]; then
    kill "$bench_redis_pid" 2>/dev/null && wait "$bench_redis_pid" 2>/dev/null
  fi
  [ -n "$bench_redis_dir" ] && rm -rf "$bench_redis_dir"
  return 0
}

bench_redis_start() {
  local name=$1
  command -v redis-server >/dev/null ||
    { echo "$name: redis-server missing (apt-get install redis-server)" >&2; exit 1; }
  bench_redis_dir=$(mktemp -d)
  trap bench_redis_cleanup EXIT
  trap 'exit 130' INT TERM
  # A free port: try random ones until a server starts on one.
  for _ in $(seq 1 20); do
    bench_redis_port=$((20000 + RANDOM % 40000))
    redis-server --port "$bench_redis_port" --bind 127.0.0.1 \
      --dir "$bench_redis_dir" --save '' --appendonly no \
      --logfile "$bench_redis_dir/redis.log" --daemonize no &
    bench_redis_pid=$!
    for _ in $(seq 1 50); do
      redis-cli -p "$bench_redis_port" ping >/dev/null 2>&1 && break
      kill -0 "$bench_redis_pid" 2>/dev/null || break
      sleep 0.1
    done
    redis-cli -p "$bench_redis_port" ping >/dev/null 2>&1 && break
    wait "$bench_redis_pid" 2>/dev/null || true
    bench_redis_pid=
  done
  [ -n "$bench_redis_pid" ] || { echo "$name: could not start redis-server" >&2; exit 1; }
  bench_redis_url="redis://127.0.0.1:$bench_redis_port/0"
}

# One line naming the machine and how busy it is: the figures of a shared
# machine mean little without it.
bench_machine_line() {
  local prefix=$1
  echo "$prefix setting machine=\"$(uname -m) $(nproc) cpus $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')\" redis=\"$(redis-server --version | cut -d' ' -f3)\" loadavg=\"$(cut -d' ' -f1-3 /proc/loadavg)\" date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
}
