#pragma once
// What one PostgreSQL connection needs (ConnectionOptions), apart from how many of them a store
// keeps (PoolOptions); each PostgreSQL store's and admin's options hold a ConnectionOptions.

#include <chrono>
#include <cstddef>
#include <string>

namespace idem::postgres {

struct ConnectionOptions {
  /// libpq connection string, URI ("postgresql://user@host:5432/db") or key=value form, of the
  /// primary. TCP keepalives and tcp_user_timeout are added where it does not set them
  /// (docs/sql.md, "Network faults").
  std::string uri{};
  /// Prefixes the table and index names: <prefix>records, <prefix>schema. Letters, digits, '_'.
  /// Stores with the same prefix on the same database share their records.
  std::string table_prefix = "idem_";
  /// Longest connect (TCP, TLS, authentication), unless the connection string sets
  /// connect_timeout (whose zero keeps this bound). Must be positive (std::invalid_argument).
  std::chrono::milliseconds connect_timeout{5000};
  /// statement_timeout on the connection. The client waits for a reply up to this plus 1 s, then
  /// drops the connection: its calls fail with store_unavailable (a commit that went out:
  /// outcome_unknown) instead of hanging (docs/sql.md, "Network faults").
  std::chrono::milliseconds statement_timeout{5000};
};

struct PoolOptions {
  /// Most connections open at once; a call waits for a free one up to acquire_timeout.
  std::size_t size = 8;
  /// Longest wait for a free pooled connection before errc::store_unavailable (a transactional
  /// claim that may block waits up to its ClaimRequest::block_for if that is longer).
  std::chrono::milliseconds acquire_timeout{5000};
};

}  // namespace idem::postgres
