// PostgresStore: the SQL record strategy on libpqxx, put together from its parts.

#include <memory>
#include <utility>

#include "idem/postgres/store.hpp"
#include "postgres/pg_backend.hpp"
#include "postgres/pg_options.hpp"
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
      replica_(std::move(parts.second)) {}

ReplicaCounters PostgresStore::replica_counters() const noexcept {
  return replica_ ? replica_->counters() : ReplicaCounters{};
}

}  // namespace idem
