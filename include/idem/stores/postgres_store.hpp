#pragma once
// PostgresStore: the SQL record store on PostgreSQL (compiled library idem::postgres, libpqxx).

#include <chrono>
#include <cstddef>
#include <string>

#include "idem/stores/sql_store.hpp"

namespace idem {

struct PostgresStoreOptions {
  /// libpq connection string, URI ("postgresql://user@host:5432/db") or key=value form.
  std::string uri{};
  /// lease (default) or transactional; see idem::SqlMode.
  SqlMode mode = SqlMode::lease;
  /// Prefixes the table and index names: <prefix>records, <prefix>schema. Letters, digits, '_'.
  std::string table_prefix = "idem_";
  /// Most connections open at once; a call waits for a free one up to acquire_timeout.
  std::size_t pool_size = 8;
  /// Longest wait for a free pooled connection before errc::store_unavailable.
  std::chrono::milliseconds acquire_timeout{5000};
  /// libpq connect_timeout for each new connection (whole seconds, at least 1), unless the
  /// connection string sets its own.
  std::chrono::milliseconds connect_timeout{5000};
  /// statement_timeout on every connection: no call hangs on the server longer than this.
  std::chrono::milliseconds statement_timeout{5000};
};

/// The unique-index record strategy on PostgreSQL. Thread-safe: a pool of connections, each used
/// by one thread at a time; a broken connection is dropped and a new one opened on demand, so the
/// store recovers by itself after a server restart. Statements are prepared once per connection.
///
/// In transactional mode a duplicate claim blocks on the holder's row lock for at most
/// ClaimRequest::block_for (lock_timeout), then replays; with block_for zero it answers
/// errc::in_progress at once.
class PostgresStore : public SqlStore {
 public:
  /// Connects lazily: an unreachable server shows as errc::store_unavailable from the calls,
  /// never as an exception here. Throws std::invalid_argument for an empty uri, a zero pool_size
  /// or a table prefix with other characters than letters, digits and '_'.
  explicit PostgresStore(PostgresStoreOptions options);
};

}  // namespace idem
