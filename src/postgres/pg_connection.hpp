#pragma once
// A libpqxx connection whose connect is bounded in milliseconds (the budget: pg_options.hpp).
//
// libpq's own connect_timeout counts whole seconds, and at least 2; this connection drives
// libpq's non-blocking connect (PQconnectStart / PQconnectPoll, through pqxx_compat.hpp) against
// a deadline of its own. It never reconnects by itself: a connection that broke stays broken,
// and the pool drops it.

#include <chrono>
#include <string>

#include "postgres/pqxx_compat.hpp"

namespace idem::postgres::detail {

/// A libpqxx connection (Connection) whose connect, libpq's non-blocking one, is bounded by
/// `connect_budget` (zero: no bound); throws pqxx::broken_connection when the server refuses,
/// fails, or does not finish the handshake in time. Never reopened by libpqxx.
class PgConnection final : public ConnectionBase {
 public:
  PgConnection(const std::string& conninfo, std::chrono::milliseconds connect_budget);
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;
};

}  // namespace idem::postgres::detail
