# shellcheck shell=bash
# A throwaway Redis Cluster for the integration tests: 6 nodes (3 primaries, 3 replicas).
#
#   source scripts/lib/cluster.sh
#   trap stop_redis_cluster EXIT
#   start_redis_cluster  # exports IDEM_TEST_REDIS_CLUSTER_SEEDS=127.0.0.1:<port>,... (all 6 nodes)
#                        # and IDEM_TEST_REDIS_CLUSTER_DIR: node <port> has its config file at
#                        # $IDEM_TEST_REDIS_CLUSTER_DIR/<port>/redis.conf (a test may restart a
#                        # node it killed with `redis-server <that file>`)
#
# IDEM_REDIS_TLS_DIR=DIR start_redis_cluster: a TLS cluster (DIR from scripts/lib/tls.sh
# make_test_ca): each node TLS only (a tls-port, TCP port 0), its bus and its replication over
# TLS too (tls-cluster yes, tls-replication yes), so that it announces its TLS port; also exports
# IDEM_TEST_REDIS_CLUSTER_URI=rediss+cluster://<seeds>?ca_file=DIR/ca.crt, which the tests use
# instead of the seeds, and IDEM_TEST_REDIS_CLI_TLS, the options a test adds to redis-cli.
#
# The nodes listen on 127.0.0.1 only, on free ports, with their files in one mktemp -d folder.
# cluster-node-timeout is 1 s so that a killed primary's replica takes over within seconds.
# Durability is switched off: the data is thrown away. This file is sourced: it leaves the
# caller's shell options alone.

# shellcheck source=scripts/lib/servers.sh
[[ $(type -t _idem_free_port) == function ]] || source "$(dirname "${BASH_SOURCE[0]}")/servers.sh"

_idem_cluster_dir=""
_idem_cluster_ports=()

# redis-cli on node PORT, over TLS in a TLS cluster.
_idem_cluster_cli() {
  local port=$1 tls
  shift
  mapfile -t tls < <(_idem_redis_cli_tls)
  redis-cli -h 127.0.0.1 -p "$port" "${tls[@]}" "$@"
}

_idem_cluster_node_ok() {
  local port=$1 info
  info=$(_idem_cluster_cli "$port" cluster info 2>/dev/null) || return 1
  [[ $info == *cluster_state:ok* ]]
}
_idem_cluster_all_ok() {
  local port
  for port in "${_idem_cluster_ports[@]}"; do _idem_cluster_node_ok "$port" || return 1; done
}
# Every replica has its primary's data (so that WAIT 1 can be met from the start).
_idem_cluster_replicas_synced() {
  local port info
  for port in "${_idem_cluster_ports[@]}"; do
    info=$(_idem_cluster_cli "$port" info replication 2>/dev/null) || return 1
    [[ $info != *role:slave* || $info == *master_link_status:up* ]] || return 1
  done
}
_idem_cluster_ready() { _idem_cluster_all_ok && _idem_cluster_replicas_synced; }

start_redis_cluster() {
  if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    _idem_say "redis-server/redis-cli not found (scripts/deps installs them)"
    return 1
  fi
  _idem_cluster_dir=$(mktemp -d "${TMPDIR:-/tmp}/idem-cluster.XXXXXX") || return 1
  _idem_cluster_ports=()
  local i port dir addrs=()
  for i in 1 2 3 4 5 6; do
    port=$(_idem_free_port 10000) || { _idem_say "no free port for a cluster node"; return 1; }
    # Two calls could pick the same port (or one's bus port); ask again until it is new.
    while [[ " ${_idem_cluster_ports[*]} " =~ \ ($port|$((port - 10000))|$((port + 10000)))\  ]]; do
      port=$(_idem_free_port 10000) || return 1
    done
    dir=$_idem_cluster_dir/$port
    mkdir -p "$dir" || return 1
    printf '%s\n' "port $port" "bind 127.0.0.1" "dir \"$dir\"" "save \"\"" "appendonly no" \
      "daemonize yes" "pidfile \"$dir/redis.pid\"" "logfile \"$dir/redis.log\"" \
      "cluster-enabled yes" "cluster-config-file \"$dir/nodes.conf\"" \
      "cluster-node-timeout 1000" "cluster-replica-validity-factor 0" \
      "repl-diskless-sync yes" "repl-diskless-sync-delay 0" >"$dir/redis.conf" || return 1
    # TLS only: the later `port 0` wins over the plain port above.
    if [[ -n ${IDEM_REDIS_TLS_DIR:-} ]]; then
      # A node that connects to another's bus or to its primary shows the client certificate:
      # the bus requires one, and the server certificate is for serverAuth only.
      { _idem_redis_tls_conf "$port" && printf '%s\n' "tls-cluster yes" "tls-replication yes" \
        "tls-client-cert-file \"$IDEM_REDIS_TLS_DIR/client.crt\"" \
        "tls-client-key-file \"$IDEM_REDIS_TLS_DIR/client.key\""; } >>"$dir/redis.conf" || return 1
    fi
    if ! redis-server "$dir/redis.conf"; then
      _idem_say "redis-server failed to start on port $port"
      _idem_show_log "$dir/redis.log"
      return 1
    fi
    _idem_cluster_ports+=("$port")
    addrs+=("127.0.0.1:$port")
  done
  for port in "${_idem_cluster_ports[@]}"; do
    if ! _idem_wait_for "$IDEM_SERVER_TIMEOUT" _idem_cluster_cli "$port" ping; then
      _idem_say "cluster node $port did not come up"
      _idem_show_log "$_idem_cluster_dir/$port/redis.log"
      return 1
    fi
  done
  local tls
  mapfile -t tls < <(_idem_redis_cli_tls)
  if ! redis-cli "${tls[@]}" --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
      >"$_idem_cluster_dir/create.log" 2>&1; then
    _idem_say "redis-cli --cluster create failed"
    _idem_show_log "$_idem_cluster_dir/create.log"
    return 1
  fi
  if ! _idem_wait_for "$IDEM_SERVER_TIMEOUT" _idem_cluster_ready; then
    _idem_say "the cluster did not reach cluster_state:ok with synced replicas in ${IDEM_SERVER_TIMEOUT}s"
    _idem_show_log "$_idem_cluster_dir/create.log" "$_idem_cluster_dir/${_idem_cluster_ports[0]}/redis.log"
    return 1
  fi
  local IFS=,
  export IDEM_TEST_REDIS_CLUSTER_SEEDS="${addrs[*]}"
  export IDEM_TEST_REDIS_CLUSTER_DIR="$_idem_cluster_dir"
  if [[ -n ${IDEM_REDIS_TLS_DIR:-} ]]; then
    export IDEM_TEST_REDIS_CLUSTER_URI="rediss+cluster://${addrs[*]}?ca_file=$IDEM_REDIS_TLS_DIR/ca.crt"
    [[ ${IDEM_REDIS_TLS_AUTH_CLIENTS:-no} != yes ]] ||
      IDEM_TEST_REDIS_CLUSTER_URI+="&cert_file=$IDEM_REDIS_TLS_DIR/client.crt&key_file=$IDEM_REDIS_TLS_DIR/client.key"
    export IDEM_TEST_REDIS_CLI_TLS="--tls --cacert $IDEM_REDIS_TLS_DIR/ca.crt --cert $IDEM_REDIS_TLS_DIR/client.crt --key $IDEM_REDIS_TLS_DIR/client.key"
  fi
  _idem_say "redis cluster up: $IDEM_TEST_REDIS_CLUSTER_SEEDS"
}

stop_redis_cluster() {
  [[ -n $_idem_cluster_dir ]] || return 0
  local pidfile pid pids=()
  # Every node a test may have started again is in the folder, whatever its port.
  for pidfile in "$_idem_cluster_dir"/*/redis.pid; do
    [[ -f $pidfile ]] && pid=$(<"$pidfile") && [[ -n $pid ]] || continue
    kill "$pid" 2>/dev/null && pids+=("$pid")
  done
  for pid in "${pids[@]}"; do
    if ! _idem_wait_for "$IDEM_SERVER_TIMEOUT" _idem_pid_gone "$pid"; then
      _idem_say "cluster node (pid $pid) ignored SIGTERM; killing it"
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$_idem_cluster_dir"
  _idem_cluster_dir=""
  _idem_cluster_ports=()
  unset IDEM_TEST_REDIS_CLUSTER_SEEDS IDEM_TEST_REDIS_CLUSTER_DIR IDEM_TEST_REDIS_CLUSTER_URI \
    IDEM_TEST_REDIS_CLI_TLS
}
