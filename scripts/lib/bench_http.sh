#!/usr/bin/env bash
# scripts/bench --http: the HTTP payments service under wrk (scripts/lib/http_load.lua).
#
#   scripts/bench --http [--build DIR] [--duration S] [--connections "1 8 32 128"] [--threads N]
#                        [--servers] [--plots DIR] OUT.json
#
# For each backend (SQLite; PostgreSQL + Redis when IDEM_BENCH_PG_URI and IDEM_BENCH_REDIS_URI
# are set, or with --servers, which starts throwaway ones, PostgreSQL durable) it starts the
# service and its bare twin (--bare: the same routes and inserts, no idempotency layers) side by
# side and runs, at each connection count, S seconds (default 10) of: health (GET /health),
# fresh (a new key per POST), replay (one key again and again), mix (90% replay, 10% fresh) and
# duplicates (every client of a wrk thread sends the same new key at once), the bare twin's
# health and fresh right after the service's. Then, with 64 slow clients connected
# (scripts/lib/slow_clients.py), health and replay again. The load average is recorded with each
# run. Writes OUT.json and OUT.csv, prints the table and the targets, and with --plots DIR draws
# DIR/http_<backend>.png (throughput and p99 against connections; docs/perf for the repository's).
# --threads passes the service's --threads. DIR defaults to build (configure it Release).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

build=$root/build
duration=10
connections="1 8 32 128"
server_threads=
servers=0
plots=
out=
while (($#)); do
  case $1 in
    --build) build=$2; shift ;;
    --duration) duration=$2; shift ;;
    --connections) connections=$2; shift ;;
    --threads) server_threads=$2; shift ;;
    --servers) servers=1 ;;
    --plots) plots=${2:?--plots needs a directory}; shift ;;
    --no-plots) plots= ;;  # the default; kept for older command lines
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    -*) echo "bench --http: unknown option $1" >&2; exit 2 ;;
    *) out=$1 ;;
  esac
  shift
done
[[ -n $out ]] || { echo "usage: scripts/bench --http [--build DIR] [--duration S] [--connections LIST] [--threads N] [--servers] [--plots DIR] OUT.json" >&2; exit 2; }
[[ $duration =~ ^[1-9][0-9]*$ ]] || { echo "bench --http: --duration needs a positive number of seconds" >&2; exit 2; }
command -v wrk >/dev/null || { echo "bench --http: wrk not found (scripts/deps installs it)" >&2; exit 1; }
command -v curl >/dev/null || { echo "bench --http: curl not found" >&2; exit 1; }
server=$build/examples/http_payments/http_payments
[[ -x $server ]] || { echo "bench --http: $server is missing (configure $build with -DCMAKE_BUILD_TYPE=Release and build http_payments)" >&2; exit 1; }
lua=$root/scripts/lib/http_load.lua

tmp=$(mktemp -d)
pids=()
# stop_all: the servers and slow clients this script started, by their ids.
stop_all() {
  local pid
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || continue
    wait "$pid" 2>/dev/null || true
  done
  pids=()
}
cleanup() {
  stop_all
  rm -rf "$tmp"
  ((servers == 0)) || stop_servers
}
trap cleanup EXIT

if ((servers)); then
  # shellcheck source=servers.sh
  source "$root/scripts/lib/servers.sh"
  if [[ -z ${IDEM_BENCH_PG_URI:-} ]]; then
    IDEM_PG_DURABLE=1 start_postgres || { echo "bench --http: could not start PostgreSQL" >&2; exit 1; }
    export IDEM_BENCH_PG_URI=$IDEM_TEST_PG_URI
  fi
  if [[ -z ${IDEM_BENCH_REDIS_URI:-} ]]; then
    start_redis || { echo "bench --http: could not start Redis" >&2; exit 1; }
    export IDEM_BENCH_REDIS_URI=$IDEM_TEST_REDIS_URI
  fi
fi

port_guard=
port_bare=
# start NAME ARGS...: the service in the background; sets port_NAME.
start() {
  local name=$1
  shift
  local extra=()
  [[ -n $server_threads ]] && extra=(--threads "$server_threads")
  "$server" --port 0 "$@" "${extra[@]}" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  pids+=($!)
  local _
  for _ in $(seq 100); do grep -q listening "$tmp/$name.out" 2>/dev/null && break; sleep 0.1; done
  grep -q listening "$tmp/$name.out" || { cat "$tmp/$name.err" >&2; echo "bench --http: $name did not start" >&2; exit 1; }
  printf -v "port_$name" '%s' "$(sed -n 's/.*:\([0-9]*\)$/\1/p' "$tmp/$name.out")"
}

# measure BACKEND MODE SCENARIO CONNECTIONS PORT [NOTE]: one wrk run, one JSON line in results.
measure() {
  local backend=$1 mode=$2 scenario=$3 c=$4 port=$5 note=${6:-}
  local url=http://127.0.0.1:$port run=r$RANDOM$RANDOM threads=$(( c < 2 ? c : 2 ))
  # The key that replay and mix send again: paid once before the run.
  curl -s -o /dev/null -H 'Authorization: Bearer bench' -H "Idempotency-Key: replay-$run" \
    -H 'Content-Type: application/json' -d '{"amount":1250,"currency":"EUR"}' "$url/payments"
  local statuses=0
  [[ $scenario == duplicates ]] && statuses=1
  local load line
  load=$(cut -d' ' -f1 /proc/loadavg)
  line=$(HTTP_LOAD_STATUSES=$statuses wrk -t"$threads" -c"$c" -d"${duration}s" --timeout 10s \
           -s "$lua" "$url" -- "$scenario" "$run" "$((c / threads))" | grep '^{' || true)
  [[ -n $line ]] || line='{"failed": true}'
  echo "{\"backend\": \"$backend\", \"mode\": \"$mode\", \"scenario\": \"$scenario\", \"connections\": $c, \"note\": \"$note\", \"load\": $load, \"wrk\": $line}" \
    | tee -a "$tmp/results.jsonl" >&2
}

# bench BACKEND: the service and its bare twin on one backend, each with its own tables.
bench() {
  local backend=$1
  if [[ $backend == sqlite ]]; then
    start guard --db "$tmp/guard.db"
    start bare --db "$tmp/bare.db" --bare
  else
    local pg=(--pg "$IDEM_BENCH_PG_URI" --redis "$IDEM_BENCH_REDIS_URI")
    start guard "${pg[@]}" --prefix "g${RANDOM}_"
    start bare "${pg[@]}" --prefix "b${RANDOM}_" --bare
  fi
  local c scenario
  for c in $connections; do
    for scenario in health fresh replay mix duplicates; do
      measure "$backend" guard "$scenario" "$c" "$port_guard"
      if [[ $scenario == health || $scenario == fresh ]]; then
        measure "$backend" bare "$scenario" "$c" "$port_bare"
      fi
    done
  done
  # 64 slow clients connected (they reconnect when the server cuts them at its deadline).
  python3 "$root/scripts/lib/slow_clients.py" "$port_guard" 64 &
  local slow=$!
  pids+=("$slow")
  sleep 2
  measure "$backend" guard health 32 "$port_guard" "64 slow clients"
  measure "$backend" guard replay 32 "$port_guard" "64 slow clients"
  stop_all
}

echo "bench --http: load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, $duration s a run" >&2
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
bench sqlite
if [[ -n ${IDEM_BENCH_PG_URI:-} && -n ${IDEM_BENCH_REDIS_URI:-} ]]; then
  bench pg_redis
else
  echo "bench --http: PostgreSQL + Redis skipped (set IDEM_BENCH_PG_URI and IDEM_BENCH_REDIS_URI, or --servers)" >&2
fi
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
echo "bench --http: load average at the end $load_end" >&2

report=(python3 "$root/scripts/bench_http_report.py" --out "$out" --load-start "$load_start"
        --load-end "$load_end" --duration "$duration")
[[ -n $plots ]] && report+=(--plots "$plots")
"${report[@]}" "$tmp/results.jsonl"
