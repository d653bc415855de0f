#!/usr/bin/env bash
# scripts/bench --proxy: idem-proxy in front of nginx under wrk (scripts/lib/proxy_load.lua).
#
#   scripts/bench --proxy [--build DIR] [--duration S] [--connections "1 32 128"] [--store URI]
#                         [--cache N] [--plots DIR] OUT.json
#
# Starts nginx (Debian's nginx-light, one worker, POST /payments answered `return 201`) and
# idem-proxy in front of it (DIR/tools/idem-proxy/idem-proxy, its defaults but the listeners on
# free ports, POST /payments a route that requires a key, the store URI, default a SQLite file in
# a temporary folder, and with --cache N a replay cache of N answers: store.cache_entries), then
# at each connection count runs S seconds (default 10) of each of, in turn: straight to nginx,
# replay through the proxy (about one key per connection, each sent again and again), straight
# to nginx again, fresh keys through the proxy (a new key for every request). The two straight
# runs are the upstream's figure beside each proxy figure, taken in the same run; the load
# average is recorded with each. When DIR/bench/idem_bench_proxy_floor is built, the replay's
# floor runs after the first straight run: the proxy's own client server answering a replay's
# bytes from memory, without route, guard or store. Writes OUT.json and OUT.csv, prints the table
# and the target (replay at least 0.8x straight), and with --plots DIR draws DIR/NAME.png, NAME
# being OUT's (throughput and p99 against connections; docs/perf for the repository's). DIR
# defaults to build (configure it Release).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

build=$root/build
duration=10
connections="1 32 128"
store=
cache=0
plots=
out=
while (($#)); do
  case $1 in
    --build) build=$2; shift ;;
    --duration) duration=$2; shift ;;
    --connections) connections=$2; shift ;;
    --store) store=$2; shift ;;
    --cache) cache=$2; shift ;;
    --plots) plots=${2:?--plots needs a directory}; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "bench --proxy: unknown option $1" >&2; exit 2 ;;
    *) out=$1 ;;
  esac
  shift
done
usage="usage: scripts/bench --proxy [--build DIR] [--duration S] [--connections LIST] [--store URI] [--cache N] [--plots DIR] OUT.json"
[[ -n $out ]] || { echo "$usage" >&2; exit 2; }
[[ $cache =~ ^[0-9]+$ ]] || { echo "bench --proxy: --cache needs a number of answers (0: no cache)" >&2; exit 2; }
[[ $duration =~ ^[1-9][0-9]*$ ]] || { echo "bench --proxy: --duration needs a positive number of seconds" >&2; exit 2; }
for c in $connections; do
  [[ $c =~ ^[1-9][0-9]*$ ]] || { echo "bench --proxy: --connections needs positive numbers" >&2; exit 2; }
done
command -v wrk >/dev/null || { echo "bench --proxy: wrk not found (scripts/deps installs it)" >&2; exit 1; }
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[[ -x $nginx ]] || { echo "bench --proxy: nginx not found (Debian: nginx-light; scripts/deps installs it)" >&2; exit 1; }
proxy=$build/tools/idem-proxy/idem-proxy
[[ -x $proxy ]] || { echo "bench --proxy: $proxy is missing (configure $build with -DCMAKE_BUILD_TYPE=Release and build idem-proxy)" >&2; exit 1; }
lua=$root/scripts/lib/proxy_load.lua

tmp=$(mktemp -d)
pids=()
# The processes this script started, by their ids.
cleanup() {
  local pid
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || continue
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_port PORT PID: returns once something listens on PORT, fails if PID exits first or 15 s pass.
wait_port() {
  local _
  for _ in $(seq 150); do
    kill -0 "$2" 2>/dev/null || return 1
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

nginx_port=$(free_port)
mkdir -p "$tmp/nginx"
cat >"$tmp/nginx/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $tmp/nginx/body;
  proxy_temp_path $tmp/nginx/proxy;
  fastcgi_temp_path $tmp/nginx/fastcgi;
  uwsgi_temp_path $tmp/nginx/uwsgi;
  scgi_temp_path $tmp/nginx/scgi;
  keepalive_requests 100000000;
  server {
    listen 127.0.0.1:$nginx_port;
    default_type application/json;
    location = /payments { return 201 '{"ok":true}'; }
  }
}
EOF
"$nginx" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -e "$tmp/nginx/error.log" \
  </dev/null >/dev/null 2>"$tmp/nginx/stderr" &
pids+=($!)
wait_port "$nginx_port" "${pids[-1]}" || { cat "$tmp/nginx/stderr" "$tmp/nginx/error.log" >&2; echo "bench --proxy: nginx did not start" >&2; exit 1; }

[[ -n $store ]] || store="sqlite://$tmp/records.db"
cat >"$tmp/proxy.toml" <<EOF
[listen]
port = 0

[upstream]
port = $nginx_port

[store]
uri = "$store"
scope = "bench-$RANDOM$RANDOM"
cache_entries = $cache

[limits]
keep_alive_requests = 100000000

[[route]]
method = "POST"
path = "/payments"
key = "required"
EOF
"$proxy" --config "$tmp/proxy.toml" </dev/null >"$tmp/proxy.out" 2>"$tmp/proxy.err" &
pids+=($!)
for _ in $(seq 150); do grep -q '^listening on' "$tmp/proxy.out" 2>/dev/null && break; sleep 0.1; done
grep -q '^listening on' "$tmp/proxy.out" || { cat "$tmp/proxy.err" >&2; echo "bench --proxy: idem-proxy did not start" >&2; exit 1; }
proxy_port=$(sed -n '1s/.*:\([0-9]*\)$/\1/p' "$tmp/proxy.out")

floor=$build/bench/idem_bench_proxy_floor
floor_port=
if [[ -x $floor ]]; then
  "$floor" </dev/null >"$tmp/floor.out" 2>"$tmp/floor.err" &
  pids+=($!)
  for _ in $(seq 150); do grep -q '^listening on' "$tmp/floor.out" 2>/dev/null && break; sleep 0.1; done
  grep -q '^listening on' "$tmp/floor.out" || { cat "$tmp/floor.err" >&2; echo "bench --proxy: $floor did not start" >&2; exit 1; }
  floor_port=$(sed -n '1s/.*:\([0-9]*\)$/\1/p' "$tmp/floor.out")
else
  echo "bench --proxy: $floor is not built: no floor figure for replays" >&2
fi

# measure TARGET SCENARIO CONNECTIONS PORT: one wrk run, one JSON line in results.
measure() {
  local target=$1 scenario=$2 c=$3 port=$4
  local run=r$RANDOM$RANDOM threads=$((c < 2 ? c : 2))
  local load line
  load=$(cut -d' ' -f1 /proc/loadavg)
  line=$(wrk -t"$threads" -c"$c" -d"${duration}s" --timeout 10s -s "$lua" \
           "http://127.0.0.1:$port" -- "$scenario" "$run" "$(((c + threads - 1) / threads))" |
           grep '^{' || true)
  [[ -n $line ]] || line='{"failed": true}'
  echo "{\"target\": \"$target\", \"scenario\": \"$scenario\", \"connections\": $c, \"load\": $load, \"wrk\": $line}" |
    tee -a "$tmp/results.jsonl" >&2
}

echo "bench --proxy: load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, $duration s a run, store $store, cache $cache" >&2
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for c in $connections; do
  measure upstream replay "$c" "$nginx_port"
  [[ -z $floor_port ]] || measure floor replay "$c" "$floor_port"
  measure proxy replay "$c" "$proxy_port"
  measure upstream fresh "$c" "$nginx_port"
  measure proxy fresh "$c" "$proxy_port"
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
echo "bench --proxy: load average at the end $load_end" >&2

report=(python3 "$root/scripts/bench_proxy_report.py" --out "$out" --load-start "$load_start"
        --load-end "$load_end" --duration "$duration" --store "${store%%://*}" --cache "$cache")
[[ -n $plots ]] && report+=(--plots "$plots")
"${report[@]}" "$tmp/results.jsonl"
