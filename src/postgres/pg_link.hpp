#pragma once
// PgLink: one libpq connection driven by blocking calls, each bounded on the client side: the
// connect by its budget, a round trip by its reply budget, past which the connection is shut down
// (libpq alone would wait until TCP gives up, minutes later). The blocking store's sessions and
// its admin run on it; a handler's pqxx::dbtransaction adopts its PGconn (pqxx_compat.hpp).

#include <libpq-fe.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "postgres/pg_query.hpp"

namespace idem::postgres::detail {

/// The server answered a statement with an error; the connection stays usable.
struct PgError : std::runtime_error {
  PgError(std::string state, const std::string& message)
      : std::runtime_error(message), sqlstate(std::move(state)) {}
  std::string sqlstate;
};

/// The connection was refused, failed or ended; it is not usable any more.
struct LinkLost : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// No reply within the budget: the connection was shut down.
struct NoReply : std::runtime_error {
  explicit NoReply(std::chrono::milliseconds budget);
};

/// The server cannot serve the store: a read-only primary, or tables of another schema version.
/// Not a fault of the connection, which stays usable.
struct UnusableServer : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class PgLink {
 public:
  /// Connects within `connect_budget` (libpq's own bound counts whole seconds; zero: no bound);
  /// throws LinkLost.
  PgLink(const std::string& conninfo, std::chrono::milliseconds connect_budget);
  PgLink(const PgLink&) = delete;
  PgLink& operator=(const PgLink&) = delete;
  ~PgLink();

  PGconn* raw() const noexcept { return conn_; }
  bool is_open() const noexcept { return !lost_ && PQstatus(conn_) == CONNECTION_OK; }
  /// An idle connection the server closed has something to read (its goodbye, or EOF): probed
  /// so that no statement is sent on a dead one and then left in doubt.
  bool looks_alive() const noexcept;

  /// Sends `query` and reads its whole answer within `budget`: the last statement's result.
  /// Throws PgError for the first statement that failed, LinkLost, or NoReply.
  Reply run(const Query& query, std::chrono::milliseconds budget);

  /// `text` as the inside of an SQL string literal on this connection.
  std::string escape(std::string_view text) const;

 private:
  [[noreturn]] void lost(std::string_view what);

  PGconn* conn_ = nullptr;
  bool lost_ = false;
};

}  // namespace idem::postgres::detail
