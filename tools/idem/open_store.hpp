#pragma once
// Opens the admin of the store a URI names, through the admin openers of the backends this idem
// was built with (a generated table: tools/idem/CMakeLists.txt).

#include <memory>
#include <string>

#include "idem/admin.hpp"

namespace idem::cli {

/// The store's admin, or nullptr with `error` set (an unusable or unknown URI, or a backend this
/// build of idem lacks).
std::unique_ptr<admin::Admin> open_store(const std::string& uri, const admin::UriOptions& options,
                                         std::string& error);

}  // namespace idem::cli
