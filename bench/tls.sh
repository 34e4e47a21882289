#!/bin/bash
# tls.sh - what TLS to Redis costs per task: the `sluice worker` command
# over rediss:// against the same worker over redis://, on one Redis that
# listens on both, in both modes.
#
#   bench/tls.sh [--rounds N] [--tasks N] [BUILD_DIR]
#
# It makes a CA and a server certificate for 127.0.0.1 with the openssl
# command, starts one redis-server with a plain port and a TLS port
# (tls-auth-clients no) in a directory of its own, and runs bench-cli
# (bench/bench-cli.c) for each of: reliable over TCP, reliable over TLS,
# fast over TCP, fast over TLS, each round starting one row further along
# (interleaved, so a busy minute does not land on one row only), Redis
# flushed before each. bench-cli fills the namespace and polls for the
# end over the plain port (its hiredis has no TLS; neither is timed or
# counted), while the worker, the process measured, connects as its row
# says. Each line is bench-cli's (worker CPU per task, Redis CPU per task,
# rate); the medians per row close the output. The server is stopped by
# its pid when the script exits.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3
tasks=20000
build=_build
while [ $# -gt 0 ]; do
  case "$1" in
  --rounds) rounds=$2; shift 2 ;;
  --tasks) tasks=$2; shift 2 ;;
  -h | --help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
  -*) echo "tls.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  *) build=$1; shift ;;
  esac
done
benchcli="$build/bench/bench-cli"
sluice="$build/cli/sluice"
module="$build/examples/demo-module/.libs/demo.so"
for f in "$benchcli" "$sluice" "$module"; do
  [ -e "$f" ] || { echo "tls.sh: $f missing: build first (./dev.sh build)" >&2; exit 1; }
done
command -v openssl >/dev/null || { echo "tls.sh: openssl missing (apt-get install openssl)" >&2; exit 1; }
unset SLUICE_URL SLUICE_MODE SLUICE_NAMESPACE SLUICE_CONFIG
. bench/redis-server.sh

dir=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$dir"
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

(
  cd "$dir"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out ca.key 2>/dev/null
  openssl req -x509 -new -key ca.key -out ca.crt -days 2 -subj /CN=bench-ca \
    -addext basicConstraints=critical,CA:TRUE 2>/dev/null
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out server.key 2>/dev/null
  openssl req -new -key server.key -out server.csr -subj /CN=127.0.0.1 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\n' >server.ext
  openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
    -days 2 -extfile server.ext -out server.crt 2>/dev/null
)

for _ in $(seq 1 20); do
  port=$((20000 + RANDOM % 40000))
  tls_port=$((port + 1))
  redis-server --port "$port" --tls-port "$tls_port" --bind 127.0.0.1 \
    --tls-cert-file "$dir/server.crt" --tls-key-file "$dir/server.key" \
    --tls-ca-cert-file "$dir/ca.crt" --tls-auth-clients no \
    --dir "$dir" --save '' --appendonly no --logfile "$dir/redis.log" \
    --daemonize no &
  pid=$!
  for _ in $(seq 1 50); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  wait "$pid" 2>/dev/null || true
  pid=
done
[ -n "$pid" ] || { echo "tls.sh: could not start redis-server" >&2; exit 1; }
plain="redis://127.0.0.1:$port/0"
tls="rediss://127.0.0.1:$tls_port/0?tls_ca_file=$dir/ca.crt"
out="$dir/lines"
log="$dir/workers.log"

bench_machine_line bench
rows=("reliable tcp" "reliable tls" "fast tcp" "fast tls")
for round in $(seq 0 $((rounds - 1))); do
  for i in $(seq 0 $((${#rows[@]} - 1))); do
    read -r mode transport <<<"${rows[$(((i + round) % ${#rows[@]}))]}"
    worker_url=$plain
    [ "$transport" = tls ] && worker_url=$tls
    redis-cli -p "$port" flushall >/dev/null
    "$benchcli" --url "$plain" --mode "$mode" --namespace tls --log "$log" \
      --label "bench tool=sluice-worker transport=$transport round=$round" \
      --tasks "$tasks" -- \
      "$sluice" worker --module "$module" --url "$worker_url" --mode "$mode" \
      --namespace tls | tee -a "$out" ||
      { echo "tls.sh: bench-cli failed; the workers' log ends:" >&2; tail -n 20 "$log" >&2; exit 1; }
  done
done

# Medians of each row over the rounds.
awk '
  function field(l, k,   re) { re = " " k "="; if (match(l, re "[^ ]*")) return substr(l, RSTART + length(re), RLENGTH - length(re)); return "" }
  function median(s,   a, n, i, j, t) {
    n = split(s, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return a[int((n + 1) / 2)]
  }
  { k = field($0, "mode") " " field($0, "transport")
    w[k] = w[k] " " field($0, "worker_cpu_us_per_task")
    r[k] = r[k] " " field($0, "redis_cpu_us_per_task")
    t[k] = t[k] " " field($0, "rate_per_s") }
  END { for (k in w) { split(k, m, " ")
    printf "bench tls median mode=%s transport=%s worker_cpu_us_per_task=%s redis_cpu_us_per_task=%s rate_per_s=%s\n", m[1], m[2], median(w[k]), median(r[k]), median(t[k]) } }' "$out" | sort
