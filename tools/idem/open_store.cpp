#include "open_store.hpp"

#include <string_view>

#ifdef IDEM_CLI_SQLITE
#include "idem/sqlite/admin.hpp"
#endif
#ifdef IDEM_CLI_POSTGRES
#include "idem/postgres/admin.hpp"
#endif
#ifdef IDEM_CLI_REDIS
#include "idem/redis/admin.hpp"
#include "idem/redis/client.hpp"
#endif

namespace idem::cli {

namespace {
bool starts(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
}  // namespace

OpenedStore open_store(const std::string& uri, const std::string& table_prefix,
                       const std::string& redis_prefix, std::string& error) {
  OpenedStore out;
  try {
    if (starts(uri, "sqlite:")) {
#ifdef IDEM_CLI_SQLITE
      std::string path = uri.substr(7);
      if (starts(path, "//")) path = path.substr(2);  // sqlite:///abs/path
      if (path.empty()) {
        error = "the sqlite URI names no file (sqlite:PATH)";
        return out;
      }
      out.admin = admin::sqlite_admin({.path = path, .table_prefix = table_prefix});
#else
      error = "this idem was built without SQLite";
#endif
    } else if (starts(uri, "postgresql://") || starts(uri, "postgres://")) {
#ifdef IDEM_CLI_POSTGRES
      out.admin = admin::postgres_admin({.uri = uri, .table_prefix = table_prefix});
#else
      error = "this idem was built without PostgreSQL";
#endif
    } else if (starts(uri, "redis://") || starts(uri, "redis+cluster://") ||
               starts(uri, "unix://")) {
#ifdef IDEM_CLI_REDIS
      std::shared_ptr<redis::Client> client;
      if (starts(uri, "redis+cluster://")) {
        Result<redis::ClusterOptions> options = redis::ClusterOptions::from_uri(uri);
        if (!options) {
          error = options.failure().message;
          return out;
        }
        client = std::make_shared<redis::Client>(std::move(options).value());
      } else {
        Result<redis::ConnectionOptions> options = redis::ConnectionOptions::from_uri(uri);
        if (!options) {
          error = options.failure().message;
          return out;
        }
        client = std::make_shared<redis::Client>(std::move(options).value());
      }
      out.admin = admin::redis_admin(*client, {.prefix = redis_prefix});
      out.keep = client;
#else
      error = "this idem was built without Redis";
#endif
    } else {
      error = "unknown store URI '" + uri +
              "': use sqlite:PATH, postgresql://..., redis://... or redis+cluster://...";
    }
  } catch (const std::exception& e) {
    error = e.what();
    out.admin.reset();
  }
  return out;
}

}  // namespace idem::cli
