#pragma once
// AsyncConnection: a service's own statements on PostgreSQL without blocking its event loop, on
// libpq's pipeline mode driven by Boost.Asio, as AsyncPostgresStore (idem::asio_postgres).

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "idem/postgres/options.hpp"
#include "idem/result.hpp"

namespace idem::postgres {

namespace detail {
class PgPipeline;  // src/postgres/pg_pipeline.hpp
}  // namespace detail

/// What a statement answered: its rows, each cell in its text form (bytea decoded to its
/// bytes), nullopt for NULL; and how many rows it inserted, updated or deleted.
struct QueryRows {
  std::vector<std::vector<std::optional<std::string>>> rows;
  std::uint64_t affected = 0;
};

/// One connection, opened on the first statement, carrying every statement in flight, each a
/// transaction of its own. A connection that fails, or whose oldest statement waited
/// statement_timeout + 1 s, is dropped and its statements fail (store_unavailable: one on its way
/// may or may not have run); the next after the reconnect backoff (50 ms doubling to 2 s) opens a
/// new one. Thread-safe (a strand of `executor`). Destroy it after every statement on it has
/// completed, with its executor's io_context still alive.
class AsyncConnection {
 public:
  /// Connects lazily; `options.table_prefix` is not used. Throws std::invalid_argument for an
  /// empty uri, one libpq cannot read, or a connect_timeout that is not positive.
  AsyncConnection(const boost::asio::any_io_executor& executor, ConnectionOptions options);
  ~AsyncConnection();
  AsyncConnection(const AsyncConnection&) = delete;
  AsyncConnection& operator=(const AsyncConnection&) = delete;

  /// Runs `sql` with `params` as its text parameters ($1, $2, ...). Fails with the server's
  /// error, or store_unavailable when the connection fails or stays silent.
  boost::asio::awaitable<Result<QueryRows>> query(std::string sql,
                                                  std::vector<std::string> params = {});

 private:
  std::shared_ptr<detail::PgPipeline> pipeline_;
};

}  // namespace idem::postgres
