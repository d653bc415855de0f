#pragma once
// What one PostgreSQL connection needs (ConnectionOptions), apart from how many of them a store
// keeps (PoolOptions). PostgresStoreOptions, AsyncPostgresStoreOptions and PostgresAdminOptions
// each hold a ConnectionOptions; set one field and the others keep their defaults:
//
//   idem::PostgresStoreOptions{.connection = {.uri = "postgresql://app@db/shop"},
//                              .pool = {.size = 16}}

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
  /// connect_timeout (libpq's whole seconds, at least 2); its zero, libpq's "wait forever",
  /// keeps this bound. Must be positive (std::invalid_argument).
  std::chrono::milliseconds connect_timeout{5000};
  /// statement_timeout on the connection: no statement runs on the server longer than this. The
  /// client waits for a reply up to this plus 1 s, then drops the connection: its calls fail
  /// with errc::store_unavailable (a commit that went out: errc::outcome_unknown) instead of
  /// hanging (docs/sql.md, "Network faults").
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
