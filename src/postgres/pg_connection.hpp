#pragma once
// A libpqxx connection whose connect is bounded in milliseconds, and the libpq settings the
// store adds to a connection string where the user did not set them.
//
// libpq's own connect_timeout counts whole seconds, and at least 2; this connection drives
// libpq's non-blocking connect (PQconnectStart / PQconnectPoll, through pqxx_compat.hpp) against
// a deadline of its own. It never reconnects by itself: a connection that broke stays broken,
// and the pool drops it.

#include <chrono>
#include <string>

#include "postgres/pqxx_compat.hpp"

namespace idem::pg {

/// `conninfo` (a URI or key=value string) with TCP keepalives and tcp_user_timeout added where
/// it does not set them: keepalives=1, keepalives_idle=10, keepalives_interval=5,
/// keepalives_count=3, tcp_user_timeout=10000 (ms). A dead peer is then noticed by the kernel
/// within about 10 s of silence, idle or not, on connections the reply watchdog does not watch.
std::string with_network_defaults(const std::string& conninfo);

/// How long a connect may take: the connect_timeout `conninfo` sets (libpq's meaning: whole
/// seconds, at least 2, zero or less for none), else `fallback`. Zero: no limit.
std::chrono::milliseconds connect_budget(const std::string& conninfo,
                                         std::chrono::milliseconds fallback);

/// A libpqxx connection (pg::Connection) whose connect, libpq's non-blocking one, is bounded by
/// `connect_budget` (zero: no bound); throws pqxx::broken_connection when the server refuses,
/// fails, or does not finish the handshake in time. Never reopened by libpqxx.
class PgConnection final : public ConnectionBase {
 public:
  PgConnection(const std::string& conninfo, std::chrono::milliseconds connect_budget);
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;
};

}  // namespace idem::pg
