# shellcheck shell=bash
# The PostgreSQL suites over TLS, on servers of their own.
#
#   source scripts/lib/pg_tls.sh
#   run_postgres_tls_suites BUILD [CTEST ARGS...]
#
# In a subshell, so that the caller's servers and variables stay as they are: makes a throwaway
# authority (tls.sh's make_test_ca), starts a PostgreSQL primary and its replica in TLS mode
# (servers.sh: IDEM_PG_TLS_DIR=DIR start_postgres), whose IDEM_TEST_PG_URI and
# IDEM_TEST_PG_REPLICA_URI say sslmode=verify-full, and runs BUILD's PostgreSQL tests on them by
# those URIs alone: the labels postgres and postgres-tls, then the asynchronous store's cases
# (label async). Some tests labelled postgres use Redis too (the admin command's, the
# simulator's): a Redis and a Redis Cluster of the run's own serve them, in plaintext. The output is kept in BUILD/ctest-postgres-tls.log; a test that fails or skips
# itself fails the run. The servers are stopped and the folder removed either way.

_idem_pg_tls_lib=$(dirname "${BASH_SOURCE[0]}")
# Sourced again, servers.sh would forget the caller's servers (stop_servers could not stop them).
# shellcheck source=scripts/lib/servers.sh
[[ $(type -t start_postgres) == function ]] || source "$_idem_pg_tls_lib/servers.sh"
# shellcheck source=scripts/lib/tls.sh
source "$_idem_pg_tls_lib/tls.sh"
# shellcheck source=scripts/lib/cluster.sh
[[ $(type -t start_redis_cluster) == function ]] || source "$_idem_pg_tls_lib/cluster.sh"
# shellcheck source=scripts/lib/ctest_skips.sh
source "$_idem_pg_tls_lib/ctest_skips.sh"

# The asynchronous store's cases in idem_async_test (tests/async), by name.
_idem_pg_tls_async='^(Postgres/|AsyncPostgres)'

run_postgres_tls_suites() {
  local build=${1:?run_postgres_tls_suites needs a build folder}
  shift
  (
    log=$build/ctest-postgres-tls.log
    dir=$(mktemp -d "${TMPDIR:-/tmp}/idem-pg-tls.XXXXXX") || exit 1
    # This subshell's copies of the caller's server folders: forgotten, so that the stop below
    # stops this run's servers alone.
    _idem_pg_dir="" _idem_pg_replica_dir="" _idem_pg_port="" _idem_redis_dir=""
    _idem_cluster_dir="" _idem_cluster_ports=()
    trap 'stop_servers; stop_redis_cluster; rm -rf "$dir"' EXIT
    make_test_ca "$dir/ca" || exit 1
    IDEM_PG_TLS_DIR=$dir/ca start_postgres || exit 1
    start_postgres_replica || exit 1
    start_redis || exit 1
    start_redis_cluster || exit 1
    set -o pipefail # a failed ctest fails the run, not hidden behind tee
    rc=0
    { ctest --test-dir "$build" --output-on-failure -L '^(postgres|postgres-tls)$' "$@" &&
      ctest --test-dir "$build" --output-on-failure -L '^async$' -R "$_idem_pg_tls_async" "$@"; } \
      2>&1 | tee "$log" || rc=1
    fail_on_skips "$log" postgres-tls || rc=1
    exit "$rc"
  )
}
