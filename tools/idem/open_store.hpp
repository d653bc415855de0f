#pragma once
// Opens the admin of the store a URI names: sqlite:PATH, postgresql://... (or postgres://),
// redis://... and redis+cluster://...

#include <memory>
#include <string>

#include "idem/admin.hpp"

namespace idem::cli {

struct OpenedStore {
  std::shared_ptr<void> keep;  // what the admin needs alive (a Redis client)
  std::unique_ptr<admin::Admin> admin;
};

/// The store's admin, or an error message (an unusable or unknown URI, or an adapter this
/// build of idem lacks).
OpenedStore open_store(const std::string& uri, const std::string& table_prefix,
                       const std::string& redis_prefix, std::string& error);

}  // namespace idem::cli
