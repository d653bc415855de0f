#pragma once
// PgBackend: how the SQL engine reaches one PostgreSQL server (the primary, or a replica): a
// pool of PgSessions, each idle one probed before it is lent.

#include <chrono>
#include <exception>
#include <string>
#include <string_view>

#include "common/connection_pool.hpp"
#include "idem/postgres/store.hpp"
#include "postgres/pg_session.hpp"
#include "sql/engine.hpp"
#include "sql/statements.hpp"

namespace idem::postgres::detail {

class PgBackend final : public sql::Backend {
 public:
  PgBackend(PostgresStoreOptions options, Role role);  // `options` checked; connects nothing yet
  ~PgBackend() override;

  /// Waits up to `wait` or acquire_timeout, whichever is longer (a transactional claim may wait
  /// its block_for).
  sql::SessionLease acquire(std::chrono::milliseconds wait) override;
  void create_schema() override;
  Failure failure(std::exception_ptr error, bool& broken,
                  bool transactional_claim) const noexcept override;
  const sql::Statements& statements() const noexcept override { return text_; }

  std::string_view store_name() const noexcept override { return PostgresStore::kStoreName; }
  PoolStats pool_stats() const noexcept override { return pool_.stats(); }
  bool claim_reads_first() const noexcept override { return true; }

 private:
  using SessionPool = sql::SessionPool;

  PostgresStoreOptions options_;
  Role role_;
  std::string conninfo_;
  std::chrono::milliseconds connect_budget_;
  sql::Statements text_;
  SessionPool pool_;
};

}  // namespace idem::postgres::detail
