#pragma once
// The PostgreSQL stores' options read: their checks, the replica pool's, the libpq defaults.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "idem/postgres/store.hpp"

namespace idem::postgres::detail {

/// How long past the statement timeout in force a reply may take before the connection is given
/// up: the server answers a statement it cancelled at once, so this is network time.
inline constexpr std::chrono::milliseconds kReplyMargin{1000};

/// Why a primary that is a hot standby (or read-only by default) fails claims and commits.
inline constexpr const char* kReadOnly =
    "idem: postgres server is read-only (a hot standby, or default_transaction_read_only is on): "
    "claims and commits need the primary";

/// Why libpq cannot read `conninfo`, in its words (the password redacted); nullopt when it can.
std::optional<std::string> conninfo_error(const std::string& conninfo);

/// Throws std::invalid_argument, naming `who` and `field` (e.g. "connection."), for an unusable
/// uri, a connect_timeout that is not positive, or (`tables`) a bad table prefix.
void check(const ConnectionOptions& connection, std::string_view who, std::string_view field,
           bool tables = true);

/// `options` after check() of both connections and the pool sizes (std::invalid_argument).
PostgresStoreOptions checked(PostgresStoreOptions options);

/// The replica pool's options: its own uri, limits and timeouts, on the same tables.
PostgresStoreOptions replica_pool_options(const PostgresStoreOptions& options);

/// `conninfo` with TCP keepalives and tcp_user_timeout added where it does not set them, so the
/// kernel notices a dead peer within about 10 s, also where the reply watchdog does not watch.
std::string with_network_defaults(const std::string& conninfo);

/// How long a connect may take: the connect_timeout `conninfo` sets (libpq's whole seconds, at
/// least 2), else `fallback`, also for libpq's "wait forever" (zero or less).
std::chrono::milliseconds connect_budget(const std::string& conninfo,
                                         std::chrono::milliseconds fallback);

}  // namespace idem::postgres::detail
