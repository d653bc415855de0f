# shellcheck shell=bash
# Throwaway Redis and PostgreSQL servers for the integration tests.
#
#   source scripts/lib/servers.sh
#   trap stop_servers EXIT
#   start_redis      # exports IDEM_TEST_REDIS_URI=redis://127.0.0.1:<port>, IDEM_TEST_REDIS_CONF
#                    # IDEM_REDIS_TLS_DIR=DIR start_redis: TLS only (a tls-port, TCP port 0; the
#                    # unix socket stays plain) with DIR's certificates from scripts/lib/tls.sh
#                    # make_test_ca: exports IDEM_TEST_REDIS_URI=rediss://127.0.0.1:<port>?
#                    # ca_file=DIR/ca.crt (and the client certificate with
#                    # IDEM_REDIS_TLS_AUTH_CLIENTS=yes, which makes the server require one);
#                    # IDEM_REDIS_TLS_CERT=expired serves DIR/expired.crt instead of server.crt
#   start_postgres   # exports IDEM_TEST_PG_URI=postgresql://postgres@127.0.0.1:<port>/idem_test
#                    # (IDEM_PG_DURABLE=1 start_postgres: fsync, synchronous_commit and
#                    # full_page_writes on, so that commits cost what they cost in production)
#                    # and, so a test can stop and start it: IDEM_TEST_PG_BIN (pg_ctl's folder),
#                    # IDEM_TEST_PG_DATA, IDEM_TEST_PG_LOG, IDEM_TEST_PG_OPTS (postgres options),
#                    # IDEM_TEST_PG_USER (run pg_ctl as this user; empty: as the caller)
#                    # IDEM_PG_TLS_DIR=DIR start_postgres: over TLS, with the certificates
#                    # of scripts/lib/tls.sh's make_test_ca DIR (see _idem_pg_tls below); the URI
#                    # then ends in ?sslmode=verify-full&sslrootcert=DIR/ca.crt, and
#                    # IDEM_TEST_PG_TLS_DIR=DIR is exported too
#                    # Members of the role IDEM_TEST_PG_PASSWORD_GROUP (exported: idem_password_logins,
#                    # NOLOGIN) log in over TCP with a password only (scram-sha-256); every other
#                    # role is trusted. A test makes a role of its own IN ROLE that group to see a
#                    # password checked and a wrong one refused.
#   start_postgres_replica  # after start_postgres: a hot standby of it (streaming replication),
#                    # exports IDEM_TEST_PG_REPLICA_URI=postgresql://postgres@127.0.0.1:<port>/idem_test
#                    # (with the primary's TLS settings and query string when it has them)
#                    # and, to stop and start it as above: IDEM_TEST_PG_REPLICA_DATA,
#                    # IDEM_TEST_PG_REPLICA_LOG, IDEM_TEST_PG_REPLICA_OPTS
#
# Each server listens on 127.0.0.1 only, on a free port, with its files in its own mktemp -d
# folder, so runs never touch a system server or each other. Durability is switched off unless
# IDEM_PG_DURABLE=1: the data is thrown away. On failure a function prints the server's log and returns non-zero.
# This file is sourced: it leaves the caller's shell options alone.

IDEM_SERVER_TIMEOUT=${IDEM_SERVER_TIMEOUT:-30} # seconds to wait for a server to come up or go down
_idem_redis_dir=""
_idem_redis_port=""
_idem_pg_dir=""
_idem_pg_bindir=""
_idem_pg_port=""
_idem_pg_replica_dir=""
_idem_pg_query="" # the URIs' query string: the TLS settings, or empty
_idem_pg_password_group=idem_password_logins # its members log in with a password only

_idem_say() { echo "servers: $*" >&2; }

_idem_show_log() {
  local f
  for f in "$@"; do
    [[ -f $f ]] || continue
    echo "----- $f (last 50 lines) -----" >&2
    tail -n 50 "$f" >&2 || true
  done
}

# _idem_free_port [OFFSET]: prints a free port P (and P + OFFSET free too, for a Redis Cluster
# node's bus port) below the kernel's ephemeral range (net.ipv4.ip_local_port_range). Tests stop
# and restart servers on their ports; a port inside that range could meanwhile become the local
# port of some outgoing connection, and the restarted server could not bind it. Another process
# could still take a port before the server binds it; the server then fails to start with a
# clear log line, which is rare enough to accept.
_idem_free_port() {
  local offset=${1:-0} low=32768 port _
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || low=32768
  local top=$((low - offset)) # exclusive
  ((top > 11000)) || top=$((65536 - offset))
  for _ in {1..200}; do
    port=$((10000 + RANDOM % (top - 10000)))
    if command -v python3 >/dev/null; then
      python3 -c 'import socket, sys
for p in {int(sys.argv[1]), int(sys.argv[1]) + int(sys.argv[2])}:
    s = socket.socket(); s.bind(("127.0.0.1", p)); s.close()' "$port" "$offset" 2>/dev/null ||
        continue
    elif (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null ||
      (exec 3<>"/dev/tcp/127.0.0.1/$((port + offset))") 2>/dev/null; then
      continue # a connection was taken: somebody listens there
    fi
    echo "$port"
    return 0
  done
  return 1
}

# _idem_wait_for SECONDS CMD...: runs CMD every 0.2 s until it succeeds or time runs out.
_idem_wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

# redis-cli's TLS options for a server of IDEM_REDIS_TLS_DIR (none without it). The client
# certificate goes along, for servers that require one; it does not verify the server's, which
# may be the expired one.
_idem_redis_cli_tls() {
  [[ -n ${IDEM_REDIS_TLS_DIR:-} ]] || return 0
  printf '%s\n' --tls --insecure --cert "$IDEM_REDIS_TLS_DIR/client.crt" \
    --key "$IDEM_REDIS_TLS_DIR/client.key"
}

# The config lines of a TLS-only server on `port` (none without IDEM_REDIS_TLS_DIR).
_idem_redis_tls_conf() {
  local port=$1 dir=${IDEM_REDIS_TLS_DIR:-} cert=${IDEM_REDIS_TLS_CERT:-server}
  [[ -n $dir ]] || return 0
  printf '%s\n' "port 0" "tls-port $port" "tls-cert-file \"$dir/$cert.crt\"" \
    "tls-key-file \"$dir/$cert.key\"" "tls-ca-cert-file \"$dir/ca.crt\"" \
    "tls-auth-clients ${IDEM_REDIS_TLS_AUTH_CLIENTS:-no}"
}

# Redis writes its pidfile only once it listens, so a live pidfile process that answers PING is
# our server, not some other process that took the port first.
_idem_redis_ready() {
  local pid tls
  mapfile -t tls < <(_idem_redis_cli_tls)
  pid=$(cat "$_idem_redis_dir/redis.pid" 2>/dev/null) && kill -0 "$pid" 2>/dev/null &&
    [[ $(redis-cli -h 127.0.0.1 -p "$_idem_redis_port" "${tls[@]}" ping 2>/dev/null) == PONG ]]
}
_idem_pid_gone() { ! kill -0 "$1" 2>/dev/null; }

start_redis() {
  if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    _idem_say "redis-server/redis-cli not found (scripts/deps installs them)"
    return 1
  fi
  _idem_redis_dir=$(mktemp -d "${TMPDIR:-/tmp}/idem-redis.XXXXXX") || return 1
  _idem_redis_port=$(_idem_free_port 0) || { _idem_say "no free port for redis"; return 1; }
  local log=$_idem_redis_dir/redis.log conf=$_idem_redis_dir/redis.conf
  # From a config file, so that a test can restart the same server on the same port: the
  # server names its file in INFO server (config_file), also exported as IDEM_TEST_REDIS_CONF.
  printf '%s\n' "port $_idem_redis_port" "bind 127.0.0.1" "dir \"$_idem_redis_dir\"" \
    "save \"\"" "appendonly no" "daemonize yes" "pidfile \"$_idem_redis_dir/redis.pid\"" \
    "logfile \"$log\"" "unixsocket \"$_idem_redis_dir/redis.sock\"" "unixsocketperm 700" \
    >"$conf" || return 1
  # TLS only: the later `port 0` wins over the plain port above.
  _idem_redis_tls_conf "$_idem_redis_port" >>"$conf" || return 1
  if ! redis-server "$conf"; then
    _idem_say "redis-server failed to start"
    _idem_show_log "$log"
    return 1
  fi
  if ! _idem_wait_for "$IDEM_SERVER_TIMEOUT" _idem_redis_ready; then
    _idem_say "redis did not come up on port $_idem_redis_port within ${IDEM_SERVER_TIMEOUT}s"
    _idem_show_log "$log"
    return 1
  fi
  export IDEM_TEST_REDIS_URI="redis://127.0.0.1:$_idem_redis_port"
  if [[ -n ${IDEM_REDIS_TLS_DIR:-} ]]; then
    IDEM_TEST_REDIS_URI="rediss://127.0.0.1:$_idem_redis_port?ca_file=$IDEM_REDIS_TLS_DIR/ca.crt"
    [[ ${IDEM_REDIS_TLS_AUTH_CLIENTS:-no} != yes ]] ||
      IDEM_TEST_REDIS_URI+="&cert_file=$IDEM_REDIS_TLS_DIR/client.crt&key_file=$IDEM_REDIS_TLS_DIR/client.key"
  fi
  export IDEM_TEST_REDIS_CONF="$conf"
  _idem_say "redis up: $IDEM_TEST_REDIS_URI"
}

stop_redis() {
  [[ -n $_idem_redis_dir ]] || return 0
  local pidfile=$_idem_redis_dir/redis.pid pid
  if [[ -f $pidfile ]] && pid=$(<"$pidfile") && [[ -n $pid ]]; then
    kill "$pid" 2>/dev/null || true
    if ! _idem_wait_for "$IDEM_SERVER_TIMEOUT" _idem_pid_gone "$pid"; then
      _idem_say "redis (pid $pid) ignored SIGTERM; killing it"
      kill -9 "$pid" 2>/dev/null || true
    fi
  fi
  rm -rf "$_idem_redis_dir"
  _idem_redis_dir=""
  unset IDEM_TEST_REDIS_URI IDEM_TEST_REDIS_CONF
}

# PostgreSQL refuses to run as root: when we are root, its commands run as the `postgres` user
# that Debian's postgresql package creates, and its folder belongs to that user.
_idem_pg() {
  if ((EUID == 0)); then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# Newest /usr/lib/postgresql/<version>/bin (Debian keeps initdb and pg_ctl off PATH),
# else wherever initdb is on PATH. IDEM_PG_BINDIR overrides both.
_idem_find_pg_bindir() {
  if [[ -n ${IDEM_PG_BINDIR:-} ]]; then
    echo "$IDEM_PG_BINDIR"
    return
  fi
  local d best
  best=$(for d in /usr/lib/postgresql/*/bin; do [[ -x $d/initdb ]] && echo "$d"; done | sort -V | tail -n 1 || true)
  if [[ -z $best ]] && command -v initdb >/dev/null; then
    best=$(dirname "$(command -v initdb)")
  fi
  [[ -n $best ]] && echo "$best"
}

# _idem_pg_tls DIR: makes the new server (not started yet) speak TLS only, with DIR's test
# authority (make_test_ca). Its own copies of the server files, owned by the server's user (the
# caller's keys are theirs alone), are in postgresql.conf, not on the command line, so that a test
# can point ssl_cert_file elsewhere (ALTER SYSTEM, pg_reload_conf()) and back; expired.crt and
# expired.key are copied beside them for that. pg_hba.conf: the role idem-client logs in by its
# client certificate alone (cert: the certificate's CN names the role), over TLS only; every
# other role without a password, as in plaintext mode, over TLS, and without it for the tests
# that put a fault relay reading the protocol's bytes in between (sslmode=disable).
_idem_pg_tls() {
  local dir=$1 tls=$_idem_pg_dir/tls data=$_idem_pg_dir/data f
  for f in ca.crt server.crt server.key expired.crt expired.key; do
    [[ -r $dir/$f ]] || { _idem_say "IDEM_PG_TLS_DIR=$dir has no $f (make_test_ca makes it)"; return 1; }
  done
  mkdir -p "$tls" &&
    cp "$dir"/{ca.crt,server.crt,server.key,expired.crt,expired.key} "$tls"/ &&
    chmod 600 "$tls"/*.key || return 1
  ((EUID != 0)) || chown -R postgres: "$tls" || return 1
  printf '%s\n' "ssl = on" "ssl_cert_file = '$tls/server.crt'" "ssl_key_file = '$tls/server.key'" \
    "ssl_ca_file = '$tls/ca.crt'" >>"$data/postgresql.conf" &&
    printf '%s\n' "local all all trust" \
      "hostssl all idem-client 127.0.0.1/32 cert" \
      "hostnossl all idem-client 127.0.0.1/32 reject" \
      "host all all 127.0.0.1/32 trust" \
      "host replication all 127.0.0.1/32 trust" >"$data/pg_hba.conf"
}

start_postgres() {
  _idem_pg_bindir=$(_idem_find_pg_bindir) || {
    _idem_say "initdb not found under /usr/lib/postgresql/*/bin or on PATH (scripts/deps installs postgresql)"
    return 1
  }
  if ((EUID == 0)) && ! id postgres >/dev/null 2>&1; then
    _idem_say "running as root but there is no 'postgres' user to run the server as"
    return 1
  fi
  # Always under /tmp: the postgres user must reach it, and the socket path must stay short.
  _idem_pg_dir=$(mktemp -d /tmp/idem-pg.XXXXXX) || return 1
  ((EUID != 0)) || chown postgres: "$_idem_pg_dir"
  local port log=$_idem_pg_dir/postgres.log
  port=$(_idem_free_port 0) || { _idem_say "no free port for postgres"; return 1; }

  if ! _idem_pg "$_idem_pg_bindir/initdb" -D "$_idem_pg_dir/data" -U postgres -A trust -E UTF8 \
      --locale=C --no-sync >"$_idem_pg_dir/initdb.log" 2>&1; then
    _idem_say "initdb failed"
    _idem_show_log "$_idem_pg_dir/initdb.log"
    return 1
  fi
  _idem_pg_query=""
  local tls_dir=""
  if [[ -n ${IDEM_PG_TLS_DIR:-} ]]; then
    if ! tls_dir=$(cd "$IDEM_PG_TLS_DIR" && pwd) || ! _idem_pg_tls "$tls_dir"; then
      _idem_say "postgres TLS setup failed"
      return 1
    fi
    _idem_pg_query="?sslmode=verify-full&sslrootcert=$tls_dir/ca.crt"
  fi
  # First match wins: the password group's line goes before the trusting ones.
  if ! _idem_pg sed -i "1i host all +$_idem_pg_password_group 127.0.0.1/32 scram-sha-256" \
      "$_idem_pg_dir/data/pg_hba.conf"; then
    _idem_say "cannot write the password group's line in pg_hba.conf"
    return 1
  fi
  local opts="-p $port -k $_idem_pg_dir -c listen_addresses=127.0.0.1"
  if [[ ${IDEM_PG_DURABLE:-0} == 1 ]]; then
    opts+=" -c fsync=on -c synchronous_commit=on -c full_page_writes=on"
  else
    opts+=" -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  fi
  if ! _idem_pg "$_idem_pg_bindir/pg_ctl" -D "$_idem_pg_dir/data" -l "$log" -w \
      -t "$IDEM_SERVER_TIMEOUT" -o "$opts" start >/dev/null; then
    _idem_say "postgres failed to start on port $port"
    _idem_show_log "$log"
    return 1
  fi
  if ! _idem_wait_for "$IDEM_SERVER_TIMEOUT" \
      "$_idem_pg_bindir/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres; then
    _idem_say "postgres not ready on port $port within ${IDEM_SERVER_TIMEOUT}s"
    _idem_show_log "$log"
    return 1
  fi
  if ! "$_idem_pg_bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres idem_test; then
    _idem_say "createdb idem_test failed"
    _idem_show_log "$log"
    return 1
  fi
  if ! "$_idem_pg_bindir/psql" -q -h 127.0.0.1 -p "$port" -U postgres -d idem_test \
      -c "CREATE ROLE $_idem_pg_password_group NOLOGIN" >/dev/null; then
    _idem_say "creating the role $_idem_pg_password_group failed"
    _idem_show_log "$log"
    return 1
  fi
  export IDEM_TEST_PG_PASSWORD_GROUP=$_idem_pg_password_group
  _idem_pg_port=$port
  export IDEM_TEST_PG_URI="postgresql://postgres@127.0.0.1:$port/idem_test$_idem_pg_query"
  [[ -z $tls_dir ]] || export IDEM_TEST_PG_TLS_DIR="$tls_dir"
  # A restart test runs: [runuser -u "$IDEM_TEST_PG_USER" --] "$IDEM_TEST_PG_BIN/pg_ctl"
  #   -D "$IDEM_TEST_PG_DATA" -m fast -w stop, then ... -l "$IDEM_TEST_PG_LOG" -o "$IDEM_TEST_PG_OPTS" -w start
  export IDEM_TEST_PG_BIN="$_idem_pg_bindir" IDEM_TEST_PG_DATA="$_idem_pg_dir/data"
  export IDEM_TEST_PG_LOG="$log" IDEM_TEST_PG_OPTS="$opts" IDEM_TEST_PG_USER=""
  ((EUID != 0)) || IDEM_TEST_PG_USER=postgres
  _idem_say "postgres up: $IDEM_TEST_PG_URI"
}

# A hot standby of start_postgres's server: pg_basebackup -R copies the primary and writes the
# standby settings (initdb's default pg_hba.conf already trusts replication connections from
# 127.0.0.1, and wal_level=replica is the default). Ready once it accepts read-only connections.
start_postgres_replica() {
  if [[ -z $_idem_pg_dir || -z $_idem_pg_port ]]; then
    _idem_say "start_postgres_replica: start_postgres first"
    return 1
  fi
  _idem_pg_replica_dir=$(mktemp -d /tmp/idem-pg-replica.XXXXXX) || return 1
  ((EUID != 0)) || chown postgres: "$_idem_pg_replica_dir"
  local port log=$_idem_pg_replica_dir/postgres.log data=$_idem_pg_replica_dir/data
  port=$(_idem_free_port 0) || { _idem_say "no free port for the postgres replica"; return 1; }
  if ! _idem_pg "$_idem_pg_bindir/pg_basebackup" -h 127.0.0.1 -p "$_idem_pg_port" -U postgres \
      -D "$data" -R -X stream -c fast --no-sync >"$_idem_pg_replica_dir/basebackup.log" 2>&1; then
    _idem_say "pg_basebackup from port $_idem_pg_port failed"
    _idem_show_log "$_idem_pg_replica_dir/basebackup.log" "$IDEM_TEST_PG_LOG"
    return 1
  fi
  local opts="-p $port -k $_idem_pg_replica_dir -c listen_addresses=127.0.0.1 -c fsync=off"
  opts+=" -c hot_standby=on"
  if ! _idem_pg "$_idem_pg_bindir/pg_ctl" -D "$data" -l "$log" -w -t "$IDEM_SERVER_TIMEOUT" \
      -o "$opts" start >/dev/null; then
    _idem_say "postgres replica failed to start on port $port"
    _idem_show_log "$log"
    return 1
  fi
  if ! _idem_wait_for "$IDEM_SERVER_TIMEOUT" _idem_pg_in_recovery "$port"; then
    _idem_say "postgres replica on port $port does not accept read-only connections"
    _idem_show_log "$log"
    return 1
  fi
  export IDEM_TEST_PG_REPLICA_URI="postgresql://postgres@127.0.0.1:$port/idem_test$_idem_pg_query"
  export IDEM_TEST_PG_REPLICA_DATA="$data" IDEM_TEST_PG_REPLICA_LOG="$log"
  export IDEM_TEST_PG_REPLICA_OPTS="$opts"
  _idem_say "postgres replica up: $IDEM_TEST_PG_REPLICA_URI"
}

# A standby that answers queries (hot standby) and still replays (in recovery).
_idem_pg_in_recovery() {
  [[ $("$_idem_pg_bindir/psql" -h 127.0.0.1 -p "$1" -U postgres -d idem_test -XAtqc \
    "SELECT pg_is_in_recovery()" 2>/dev/null) == t ]]
}

stop_postgres_replica() {
  [[ -n $_idem_pg_replica_dir ]] || return 0
  if [[ -f $_idem_pg_replica_dir/data/postmaster.pid ]]; then
    _idem_pg "$_idem_pg_bindir/pg_ctl" -D "$_idem_pg_replica_dir/data" -m immediate -w \
      -t "$IDEM_SERVER_TIMEOUT" stop >/dev/null 2>&1 || true
  fi
  rm -rf "$_idem_pg_replica_dir"
  _idem_pg_replica_dir=""
  unset IDEM_TEST_PG_REPLICA_URI IDEM_TEST_PG_REPLICA_DATA IDEM_TEST_PG_REPLICA_LOG
  unset IDEM_TEST_PG_REPLICA_OPTS
}

stop_postgres() {
  stop_postgres_replica || true
  [[ -n $_idem_pg_dir ]] || return 0
  if [[ -f $_idem_pg_dir/data/postmaster.pid ]]; then
    if ! _idem_pg "$_idem_pg_bindir/pg_ctl" -D "$_idem_pg_dir/data" -m fast -w \
        -t "$IDEM_SERVER_TIMEOUT" stop >/dev/null 2>&1; then
      _idem_say "postgres did not stop in time; stopping it immediately"
      _idem_pg "$_idem_pg_bindir/pg_ctl" -D "$_idem_pg_dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
  fi
  rm -rf "$_idem_pg_dir"
  _idem_pg_dir=""
  _idem_pg_port=""
  _idem_pg_query=""
  unset IDEM_TEST_PG_URI IDEM_TEST_PG_TLS_DIR IDEM_TEST_PG_BIN IDEM_TEST_PG_DATA IDEM_TEST_PG_LOG IDEM_TEST_PG_OPTS
  unset IDEM_TEST_PG_USER IDEM_TEST_PG_PASSWORD_GROUP
}

# Safe to call at any point, any number of times (e.g. from trap EXIT after a failed start).
stop_servers() {
  stop_redis || true
  stop_postgres || true
}
