#pragma once
// PgBackend: how the SQL engine reaches one PostgreSQL server (the primary, or a replica): a
// ConnectionPool of PgSessions, bounded by pool_size, a call waiting for a free one up to
// acquire_timeout (or the wait it asks for, if longer); an idle session is probed before it is
// lent, so one the server closed is dropped before any statement is sent on it.

#include <chrono>
#include <exception>
#include <string>
#include <string_view>

#include "common/connection_pool.hpp"
#include "idem/postgres/store.hpp"
#include "postgres/pg_session.hpp"
#include "postgres/reply_watchdog.hpp"
#include "sql/engine.hpp"
#include "sql/statements.hpp"

namespace idem::postgres::detail {

class PgBackend final : public sql::Backend {
 public:
  /// `options` checked already (pg_options.hpp). Connects nothing yet.
  PgBackend(PostgresStoreOptions options, Role role);
  ~PgBackend() override;

  /// A session, waiting for a free connection up to `wait` or acquire_timeout, whichever is
  /// longer (a transactional claim may wait its block_for); then idem::detail::PoolExhausted. Given
  /// back, its transaction is rolled back, and a connection that closed is dropped.
  sql::SessionLease acquire(std::chrono::milliseconds wait) override;
  void create_schema() override;
  Failure failure(std::exception_ptr error, bool& broken,
                  bool transactional_claim) const noexcept override;
  const sql::Statements& statements() const noexcept override { return text_; }

  idem::detail::PoolCounters pool_counters() const noexcept { return pool_.counters(); }
  std::string_view store_name() const noexcept override { return PostgresStore::kStoreName; }
  PoolStats pool_stats() const noexcept override { return pool_.stats(); }

 private:
  using SessionPool = sql::SessionPool;  // of PgSessions

  PostgresStoreOptions options_;
  Role role_;
  std::string conninfo_;
  std::chrono::milliseconds connect_budget_;
  sql::Statements text_;
  ReplyWatchdog watchdog_;  // before the pool: its sessions hold watches on it
  SessionPool pool_;
};

}  // namespace idem::postgres::detail
