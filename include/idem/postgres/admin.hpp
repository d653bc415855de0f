#pragma once
// The admin of a PostgreSQL record store (compiled library idem::postgres). See idem/admin.hpp.

#include <chrono>
#include <memory>
#include <string>

#include "idem/admin.hpp"

namespace idem::admin {

struct PostgresAdminOptions {
  /// libpq connection string of the primary.
  std::string uri{};
  /// The stores' table prefix.
  std::string table_prefix = "idem_";
  /// Longest connect, in milliseconds.
  std::chrono::milliseconds connect_timeout{5000};
  /// statement_timeout of the admin's connection (a release waits at most this long for a row
  /// a transactional holder has locked).
  std::chrono::milliseconds statement_timeout{5000};
};

/// Connects on first use. Throws std::invalid_argument for a bad table prefix.
std::unique_ptr<Admin> postgres_admin(PostgresAdminOptions options);

/// Opens postgresql://... and postgres://... (libpq's URIs).
extern const UriOpener postgres_uri_opener;

}  // namespace idem::admin
