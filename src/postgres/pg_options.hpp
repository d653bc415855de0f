#pragma once
// The PostgreSQL store's options read: the checks PostgresStore's constructor makes, the
// options of the replica's pool, and the libpq settings the store adds to a connection string
// where the user did not set them.

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

/// Why libpq cannot read `conninfo` (a URI or key=value string: bad syntax, an unknown option),
/// in libpq's words; nullopt when it can. Reading it makes no connection.
std::optional<std::string> conninfo_error(const std::string& conninfo);

/// Throws std::invalid_argument, naming `who` and the `field` prefix (e.g. "connection."), for
/// an empty uri or one libpq cannot read (conninfo_error), a connect_timeout that is not
/// positive, or (`tables`) a table prefix with other characters than letters, digits and '_'.
void check(const ConnectionOptions& connection, std::string_view who, std::string_view field,
           bool tables = true);

/// `options` when they are usable: check() of the connection (and of the replica's, when it has
/// a uri); throws std::invalid_argument for a zero pool size too (also the replica's).
PostgresStoreOptions checked(PostgresStoreOptions options);

/// The options of the replica's pool, from a store's checked options that name a replica: its
/// own uri, connection limits and timeouts, on the same tables.
PostgresStoreOptions replica_pool_options(const PostgresStoreOptions& options);

/// `conninfo` (a URI or key=value string) with TCP keepalives and tcp_user_timeout added where
/// it does not set them: keepalives=1, keepalives_idle=10, keepalives_interval=5,
/// keepalives_count=3, tcp_user_timeout=10000 (ms). A dead peer is then noticed by the kernel
/// within about 10 s of silence, idle or not, on connections the reply watchdog does not watch.
std::string with_network_defaults(const std::string& conninfo);

/// How long a connect may take: the connect_timeout `conninfo` sets (libpq's meaning: whole
/// seconds, at least 2), else `fallback`. A connect_timeout of zero or less, libpq's "wait
/// forever", gives `fallback` too: the stores bound every connect.
std::chrono::milliseconds connect_budget(const std::string& conninfo,
                                         std::chrono::milliseconds fallback);

}  // namespace idem::postgres::detail
