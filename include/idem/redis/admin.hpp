#pragma once
// The admin of a RedisStore's records (compiled library idem::redis). See idem/admin.hpp.
// On a cluster, listing, counting and purging visit every primary; the other operations go to
// the primary of the key's slot.

#include <memory>
#include <string>

#include "idem/admin.hpp"
#include "idem/redis/client.hpp"

namespace idem::admin {

struct RedisAdminOptions {
  /// The RedisStore's key prefix (RedisStoreOptions::prefix).
  std::string prefix = "idem:";
};

/// An admin over `client` (one server or a cluster), which must outlive it.
std::unique_ptr<Admin> redis_admin(redis::Client& client, RedisAdminOptions options = {});
/// An admin that shares `client` (a RedisStore's, say) and keeps it alive. Throws
/// std::invalid_argument for a null client.
std::unique_ptr<Admin> redis_admin(std::shared_ptr<redis::Client> client,
                                   RedisAdminOptions options = {});

/// Opens redis://..., unix://... (one server) and redis+cluster://... (a cluster).
extern const UriOpener redis_uri_opener;

}  // namespace idem::admin
