#pragma once
// The admin of a PostgreSQL record store (compiled library idem::postgres). See idem/admin.hpp.

#include <memory>

#include "idem/admin.hpp"
#include "idem/postgres/options.hpp"

namespace idem::admin {

struct PostgresAdminOptions {
  /// The primary and the stores' table prefix. statement_timeout also bounds how long a release
  /// waits for a row a transactional holder has locked.
  postgres::ConnectionOptions connection{};
};

/// Connects on first use. Throws std::invalid_argument for a bad table prefix.
std::unique_ptr<Admin> postgres_admin(PostgresAdminOptions options);

extern const UriOpener postgres_uri_opener;  ///< opens postgresql://... and postgres://...

}  // namespace idem::admin
