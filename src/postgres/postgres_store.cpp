// PostgresStore: the SQL record strategy on libpqxx, put together from its parts.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "idem/postgres/store.hpp"
#include "postgres/pg_backend.hpp"
#include "postgres/pg_options.hpp"
#include "postgres/pg_waker.hpp"
#include "sql/engine.hpp"
#include "sql/replica_reads.hpp"

namespace idem {

namespace {

// The checked options and, when they name a replica, its read path.
std::pair<PostgresStoreOptions, std::shared_ptr<sql::ReplicaReads>> with_replica(
    PostgresStoreOptions options) {
  if (options.replica.uri.empty()) return {std::move(options), nullptr};
  auto reads = std::make_shared<sql::ReplicaReads>(
      std::make_unique<postgres::detail::PgBackend>(postgres::detail::replica_pool_options(options),
                                                    postgres::detail::Role::replica),
      options.replica.retry_after);
  return {std::move(options), std::move(reads)};
}

}  // namespace

std::unique_ptr<sql::Backend> sql::make_postgres_backend(const PostgresStoreOptions& options) {
  return std::make_unique<postgres::detail::PgBackend>(postgres::detail::checked(options),
                                                       postgres::detail::Role::primary);
}

PostgresStore::PostgresStore(PostgresStoreOptions options)
    : PostgresStore(with_replica(postgres::detail::checked(std::move(options)))) {}

PostgresStore::PostgresStore(
    std::pair<PostgresStoreOptions, std::shared_ptr<sql::ReplicaReads>> parts)
    : SqlStore(std::make_unique<sql::Engine>(std::make_unique<postgres::detail::PgBackend>(
                                                 parts.first, postgres::detail::Role::primary),
                                             parts.first.mode, parts.second)),
      replica_(std::move(parts.second)),
      waker_(std::make_shared<postgres::detail::PgWaker>(
          postgres::detail::with_network_defaults(parts.first.connection.uri),
          postgres::detail::connect_budget(parts.first.connection.uri,
                                           parts.first.connection.connect_timeout),
          sql::Statements(sql::kPostgres, parts.first.connection.table_prefix).wake_channel)) {}

void PostgresStore::await_change(const Ticket& held, std::chrono::milliseconds bound) {
  sql::Engine* records = engine();
  if (records == nullptr || !waker_ || bound.count() <= 0) return;
  if (records->mode() == SqlMode::transactional) {
    records->await_transaction(held, bound);
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + bound;
  // Listening before counting itself: a wake sent once the count is in the record is heard.
  const std::optional<postgres::detail::PgWaker::Mark> mark = waker_->listening(deadline);
  if (!mark) return;  // no listener within the bound: the bound has passed
  const Result<std::string> wake = records->count_waiter(held);
  if (!wake || wake->empty()) return;  // the hold is over (or unknown): claim again
  waker_->wait(wake.value(), *mark, deadline);
}

ReplicaCounters PostgresStore::replica_counters() const noexcept {
  return replica_ ? replica_->counters() : ReplicaCounters{};
}

}  // namespace idem
