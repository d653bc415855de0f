#pragma once
// The admin of a SQLite record store (compiled library idem::sqlite). See idem/admin.hpp.

#include <chrono>
#include <memory>
#include <string>

#include "idem/admin.hpp"

namespace idem::admin {

struct SqliteAdminOptions {
  /// The database file. Every operation but migrate_schema() needs it to exist.
  std::string path{};
  std::string table_prefix = "idem_";            ///< the stores' table prefix
  std::chrono::milliseconds busy_timeout{5000};  ///< a write's wait for the file's other writers
};

/// Throws std::invalid_argument for an empty path or a bad table prefix.
std::unique_ptr<Admin> sqlite_admin(SqliteAdminOptions options);

extern const UriOpener sqlite_uri_opener;  ///< opens sqlite:PATH (and sqlite://PATH)

}  // namespace idem::admin
